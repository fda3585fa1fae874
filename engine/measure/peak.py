"""Peak memory of one real training step on CUDA (torch.cuda.max_memory_allocated) beside the estimate.

CPU has no allocator statistics in torch, so on CPU this reports that it is unavailable instead of guessing.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from engine.budget.memory import memory_budget, pure_policy
from engine.config import ModelConfig
from engine.guard import check_fits
from engine.measure import Measurement
from engine.model import build_model
from engine.runtime import TORCH_DTYPES


class MeasurementUnavailable(Exception):
    """The measurement needs hardware or statistics this machine does not have."""


def peak_unavailable(device: str | torch.device) -> str | None:
    """Why the peak cannot be measured on `device`, or None when it can (CUDA only)."""
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return (f"peak memory needs a CUDA device (torch.cuda.max_memory_allocated); "
                f"{device} has no allocator statistics")
    return None


def measure_peak(cfg: ModelConfig, batch: int, seq: int, dtype: str = "fp32", device: str = "cuda",
                 impl: str = "sdpa", seed: int = 0) -> Measurement:
    """Peak allocated bytes over build + forward + cross-entropy + backward + one AdamW step, against
    the training total of the pure-`dtype` policy (weights, grads, two AdamW states, activations)."""
    if why := peak_unavailable(device):
        raise MeasurementUnavailable(why)
    dev = torch.device(device)
    check_fits(cfg, dev, batch, seq, dtype, training=True)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    base = torch.cuda.memory_allocated(dev)
    model = build_model(cfg, device=dev, dtype=TORCH_DTYPES[dtype], seed=seed).train()
    model.set_attention(impl)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    g = torch.Generator().manual_seed(seed)
    idx, targets = torch.randint(0, cfg.vocab_size, (2, batch, seq), generator=g).to(dev)
    F.cross_entropy(model(idx).flatten(0, 1), targets.flatten()).backward()
    opt.step()
    torch.cuda.synchronize(dev)
    peak = torch.cuda.max_memory_allocated(dev) - base
    est = memory_budget(cfg, batch, seq, dtype, pure_policy(dtype), "adamw").train_total_bytes
    return Measurement("peak training memory", est, peak,
                       f"torch.cuda.max_memory_allocated over one AdamW step, {dtype} on {dev}")


def allocator_peak(fn: Callable[[], object]) -> int:
    """Peak bytes held by torch's CPU allocator while fn() runs, above what was held when it started.

    From the profiler's memory events (profile_memory=True): every CPU tensor allocation and free, kernel
    workspaces included, in time order; the peak of their running sum is the most fn() held at once."""
    from torch._C._autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == DeviceType.CPU)
    held = peak = 0
    for _, n in events:
        held += n
        peak = max(peak, held)
    return peak
