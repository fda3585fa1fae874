"""What the Latency page offers to time: batch and sequence choices for the sweep, its default within a time
target, the time budgets, and decode contexts.

Powers of two, so a log axis spaces the points evenly; sequences stop at context_length, decode contexts one
token earlier (the timed token needs a position) and at a cap that keeps one curve to seconds on each device.
The default sweep is the largest of a few grids whose estimated duration (engine.measure.estimate) fits
SWEEP_TARGET_S on this device, so a first click on a 2-core CPU takes under a minute.
"""
from __future__ import annotations

import torch

from engine.config import ModelConfig
from engine.measure.estimate import sweep_estimate

BATCHES = (1, 64)                              # the sweep's batch choices span these
MIN_SEQ = 8
DEFAULT_GRIDS = (((1, 4), (32, 128, 512)), ((1,), (32, 128, 512)), ((1, 4), (32, 128)), ((1,), (32, 128)),
                 ((1,), (32,)))               # largest first
SWEEP_BUDGET_S = 20.0                          # default time budget of the timing rounds
DECODE_BUDGET_S = 10.0
SWEEP_TARGET_S = 45.0                          # the default sweep's estimated duration stays under this
DECODE_MAX_CONTEXT = {"cuda": 4096, "cpu": 1024}
DECODE_MIN_CONTEXT = 16                        # first point when the context allows a few doublings after it


def powers_of_two(lo: int, hi: int) -> list[int]:
    """lo, 2 lo, 4 lo, ... up to hi inclusive (empty when hi < lo)."""
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= 2
    return out


def batch_choices() -> list[int]:
    return powers_of_two(*BATCHES)


def seq_choices(cfg: ModelConfig) -> list[int]:
    """Powers of two from MIN_SEQ up to context_length; just context_length when it is shorter than MIN_SEQ."""
    return powers_of_two(MIN_SEQ, cfg.context_length) or [cfg.context_length]


def default_sweep(cfg: ModelConfig, device: torch.device, dtype: str, mode: str) -> tuple[list[int], list[int]]:
    """(batches, seqs): the first grid of DEFAULT_GRIDS whose estimated duration fits SWEEP_TARGET_S at the
    default budget (a context shorter than the grid's sequences uses its two shortest choices); else the
    shortest sequence at batch 1."""
    choices = seq_choices(cfg)
    for batches, seqs in DEFAULT_GRIDS:
        fit = [s for s in seqs if s in choices] or choices[:2]
        if sweep_estimate(cfg, list(batches), fit, mode, dtype, device, SWEEP_BUDGET_S).high_s <= SWEEP_TARGET_S:
            return list(batches), fit
    return [1], choices[:1]


def decode_contexts(cfg: ModelConfig, device_type: str) -> list[int]:
    """Cached-context lengths for the decode curves: powers of two up to min(context_length - 1, the device's
    cap), from 16 when the context reaches 4 x 16, else from 1 so a short context still draws a curve."""
    top = min(cfg.context_length - 1, DECODE_MAX_CONTEXT.get(device_type, DECODE_MAX_CONTEXT["cpu"]))
    return powers_of_two(DECODE_MIN_CONTEXT if top >= 4 * DECODE_MIN_CONTEXT else 1, top)
