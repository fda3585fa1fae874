"""What the Latency page offers to time: batch and sequence choices for the sweep, and decode contexts.

Powers of two, so a log axis spaces the points evenly; sequences stop at context_length, decode contexts one
token earlier (the timed token needs a position) and at a cap that keeps one curve to seconds on each device.
"""
from __future__ import annotations

from engine.config import ModelConfig

BATCHES = (1, 64)                              # the sweep's batch choices span these
DEFAULT_BATCHES = (1, 4)
MIN_SEQ = 8
DEFAULT_SEQS = (32, 128, 512)
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


def default_seqs(cfg: ModelConfig) -> list[int]:
    """32, 128 and 512 where the context allows them, else the two shortest choices."""
    choices = seq_choices(cfg)
    return [s for s in choices if s in DEFAULT_SEQS] or choices[:2]


def decode_contexts(cfg: ModelConfig, device_type: str) -> list[int]:
    """Cached-context lengths for the decode curves: powers of two up to min(context_length - 1, the device's
    cap), from 16 when the context reaches 4 x 16, else from 1 so a short context still draws a curve."""
    top = min(cfg.context_length - 1, DECODE_MAX_CONTEXT.get(device_type, DECODE_MAX_CONTEXT["cpu"]))
    return powers_of_two(DECODE_MIN_CONTEXT if top >= 4 * DECODE_MIN_CONTEXT else 1, top)
