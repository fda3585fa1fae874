"""Measure one config: the sequence the Budgets page and `python -m engine memory|flops --measure` share.

Every precondition is checked first, so a refusal comes before any real model exists: the peak needs CUDA,
and engine.guard.check_fits compares the estimate with the free memory of `device`. Then FLOPs are counted
on the meta device (any size) and the model is built for real for activation bytes, the KV cache of a decode
step and the peak of a training step. Results are keyed as the CLI's JSON names them.
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch

from engine.config import ModelConfig
from engine.guard import check_fits
from engine.measure import Measurement
from engine.measure.activations import measure_activations
from engine.measure.flops import measure_flops
from engine.measure.kvcache import measure_kv_cache
from engine.measure.peak import MeasurementUnavailable, measure_peak, peak_unavailable

STEPS = ("flops", "activations", "kv_cache", "peak")     # run in this order, whatever order they are asked in
REAL = {"activations", "kv_cache", "peak"}               # build a model on `device`: guarded
TRAINING = {"activations", "peak"}                       # hold a training step's memory (else inference)


def measure_config(cfg: ModelConfig, batch: int, seq: int, dtype: str = "fp32", impl: str = "sdpa",
                   device: str | torch.device = "cpu", steps: Iterable[str] = STEPS,
                   progress: Callable[[str], None] | None = None) -> dict[str, Measurement]:
    """Estimate beside measurement for the chosen `steps`, keyed forward_flops, backward_flops,
    activations_bytes, kv_cache_bytes, peak_train_bytes. `progress` gets a short label before each step.
    Raises MeasurementUnavailable (peak off CUDA) or MemoryRefusal before anything is counted or built."""
    want = set(steps)
    if unknown := want - set(STEPS):
        raise ValueError(f"steps: {', '.join(sorted(unknown))} not among {', '.join(STEPS)}")
    if "peak" in want and (why := peak_unavailable(device)):
        raise MeasurementUnavailable(why)
    check_fits(cfg, device if want & REAL else "meta", batch, seq, dtype, training=bool(want & TRAINING),
               attention=impl)
    say = progress or (lambda label: None)
    out: dict[str, Measurement] = {}
    if "flops" in want:
        say("Counting FLOPs on the meta device")
        out |= measure_flops(cfg, batch, seq, impl)
    if "activations" in want:
        say(f"Building {cfg.name} on {device} and recording saved tensors")
        out["activations_bytes"] = measure_activations(cfg, batch, seq, impl, dtype, device)
    if "kv_cache" in want:
        say("Filling a KV cache")
        out["kv_cache_bytes"] = measure_kv_cache(cfg, batch, seq, dtype, device)
    if "peak" in want:
        say("Running one training step for the peak memory")
        out["peak_train_bytes"] = measure_peak(cfg, batch, seq, dtype, device, impl)
    return out
