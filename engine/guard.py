"""Refuse, with the numbers, to build a model that would not fit, instead of crashing the process.

Before a real (non-meta) model is built, the closed-form estimate is compared with the memory free on the
target device: CUDA via torch.cuda.mem_get_info, CPU via /proc/meminfo MemAvailable.
"""
from __future__ import annotations

import os

import torch

from engine.budget.memory import memory_budget, output_logits_bytes, pure_policy
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.runtime import DTYPE_BYTES, dtype_name
from engine.units import fmt_bytes
from engine.validation import choice_problem, require

HEADROOM = 0.9      # use at most this share of the free memory


class MemoryRefusal(Exception):
    """The estimate exceeds the free memory; the message states both numbers."""

    def __init__(self, message: str, estimate: int, free: int):
        super().__init__(message)
        self.estimate, self.free = estimate, free


def free_bytes(device: str | torch.device) -> int:
    """Bytes free for a new allocation on `device`."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.mem_get_info(dev)[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def needed_bytes(cfg: ModelConfig, batch: int, seq: int, dtype: str, training: bool) -> int:
    """Training: weights, grads, AdamW state and activations in `dtype` (pure precision, no master copy).
    Inference: weights, KV cache and the logits of the whole sequence."""
    if training:
        return memory_budget(cfg, batch, seq, dtype, pure_policy(dtype)).train_total_bytes
    b = memory_budget(cfg, batch, seq, dtype)
    return b.infer_total_bytes + output_logits_bytes(cfg, batch, seq, dtype)


def check_fits(cfg: ModelConfig, device: str | torch.device, batch: int, seq: int,
               dtype: str | torch.dtype = "fp32", training: bool = True) -> None:
    """Raise MemoryRefusal if the estimate exceeds HEADROOM of the free memory on `device`; meta always fits."""
    dev = torch.device(device)
    if dev.type == "meta":
        return
    name = dtype_name(dtype)
    if name not in DTYPE_BYTES:
        require(choice_problem("dtype", dtype, DTYPE_BYTES))
    need = needed_bytes(cfg, batch, seq, name, training)
    free = free_bytes(dev)
    if need > HEADROOM * free:
        what = "training step" if training else "inference"
        raise MemoryRefusal(
            f"refusing to build {cfg.name} ({count_params(cfg).total:,} params) on {dev}: a {what} at "
            f"batch={batch}, seq={seq} in {name} needs about {fmt_bytes(need)}, but only {fmt_bytes(free)} is "
            f"free ({int(HEADROOM * 100)}% usable = {fmt_bytes(HEADROOM * free)})", need, free)
