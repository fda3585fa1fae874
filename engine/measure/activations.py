"""Activation bytes as autograd really saves them: saved_tensors_hooks over forward + F.cross_entropy.

Each distinct storage (untyped_storage data_ptr) is counted once at its full size, so views, the same
tensor saved by several ops (a norm output read by q, k and v) and tables shared by all layers count once;
parameters (and views of them, e.g. a tied head's weight) are excluded.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.budget.activations import activation_estimate
from engine.config import ModelConfig
from engine.guard import check_fits
from engine.measure import Measurement
from engine.model import DecoderLM, build_model
from engine.runtime import TORCH_DTYPES


def saved_bytes(model: DecoderLM, idx: torch.Tensor, targets: torch.Tensor) -> int:
    """Bytes of the distinct non-parameter storages saved for backward by one forward + cross-entropy."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = max(seen.get(s.data_ptr(), 0), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(idx)
        F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    return sum(seen.values())


def measure_activations(cfg: ModelConfig, batch: int, seq: int, impl: str = "sdpa", dtype: str = "fp32",
                        device: str = "cpu", seed: int = 0) -> Measurement:
    """Build the model for real, run one training-mode forward + loss, compare with the closed form.
    Raises MemoryRefusal first when a training step would not fit on `device` (as measure_kv_cache does)."""
    check_fits(cfg, device, batch, seq, dtype, training=True)
    model = build_model(cfg, device=device, dtype=TORCH_DTYPES[dtype], seed=seed)
    model.train()
    model.set_attention(impl)
    g = torch.Generator().manual_seed(seed)
    idx, targets = torch.randint(0, cfg.vocab_size, (2, batch, seq), generator=g).to(device)
    measured = saved_bytes(model, idx, targets)
    est = activation_estimate(cfg, batch, seq, dtype, impl).total
    return Measurement("activation bytes", est, measured,
                       f"saved_tensors_hooks, distinct storages, {impl} attention, {dtype} on {device}")
