"""FLOPs as torch.utils.flop_counter.FlopCounterMode counts them, for one forward + cross-entropy + backward.

Counted on the meta device: nothing is allocated (a 70B model costs nothing), and there SDPA dispatches to
its math composite, whose two batched matmuls (QK^T, PV) FlopCounterMode does count. On a real CPU tensor the
fused kernel (_scaled_dot_product_flash_attention_for_cpu) has no FLOP formula and would count 0.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from engine.budget.flops import flops_budget
from engine.config import ModelConfig
from engine.measure import Measurement
from engine.model import build_model


def counted_flops(cfg: ModelConfig, batch: int, seq: int, impl: str = "sdpa") -> tuple[int, int]:
    """(forward, backward) FLOPs counted by FlopCounterMode on a meta-device model."""
    model = build_model(cfg, device="meta")
    model.train()
    model.set_attention(impl)
    idx = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    counter = FlopCounterMode(display=False)
    with counter:
        loss = F.cross_entropy(model(idx).flatten(0, 1), idx.flatten())
        forward = counter.get_total_flops()
        loss.backward()
    return forward, counter.get_total_flops() - forward


def measure_flops(cfg: ModelConfig, batch: int, seq: int, impl: str = "sdpa") -> dict[str, Measurement]:
    """Closed-form forward and backward FLOPs beside FlopCounterMode's count."""
    fwd, bwd = counted_flops(cfg, batch, seq, impl)
    est = flops_budget(cfg, batch, seq)
    how = f"FlopCounterMode on the meta device, {impl} attention"
    return {"forward_flops": Measurement("forward FLOPs", est.forward_flops, fwd, how),
            "backward_flops": Measurement("backward FLOPs", est.backward_flops, bwd, how)}
