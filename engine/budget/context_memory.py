"""Inference memory against context length: weights, the attention layers' KV cache, the recurrent layers' state.

total(T) = P * e + kv_cache_bytes(T) + state_bytes, for `batch` sequences in `dtype` (engine/budget/memory.py:
the KV cache sums the attention layers only and grows with T; the state is fixed per sequence, under vLLM's
convention as this engine's decode cache holds it). `crossing` finds the first context at which the total exceeds
a device's memory, exactly (the KV cache never shrinks as T grows, so a bisection over whole tokens finds it).
`all_attention` is the same model with every mixer softmax attention: the trace a hybrid is compared against.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.budget.devices import DEVICE_PROFILES
from engine.budget.memory import kv_cache_bytes, state_bytes
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.layers.mixers import RECURRENT_WORDS
from engine.runtime import DTYPE_BYTES
from engine.validation import choice_problem, int_problem, require


def all_attention(cfg: ModelConfig) -> ModelConfig:
    """cfg with every recurrent mixer replaced by full softmax attention (attention beside a recurrent mixer keeps
    its attention alone; FFN-only layers and every FFN stay): the same model as a plain transformer. A model
    without recurrent layers is returned as it is."""
    if cfg.layer_types is None or not any(w in RECURRENT_WORDS for t in cfg.layer_types for w in t.split("+")):
        return cfg
    words = []
    for t in cfg.layer_types:
        kept = [w for w in t.split("+") if w not in RECURRENT_WORDS]
        words.append(kept[0] if kept else "full")   # "none" (no mixer) is kept as it is
    return cfg.replace(name=f"{cfg.name} (every mixer attention)", layer_types=tuple(words), state_dtype=None)


@dataclass(frozen=True)
class ContextMemory:
    """Inference memory of one model along a grid of context lengths (bytes)."""
    tokens: tuple[int, ...]
    weights: int               # P * e, whatever the context
    kv: tuple[int, ...]        # the attention layers' KV cache at each context
    state: int                 # the recurrent layers' state, whatever the context

    @property
    def totals(self) -> tuple[int, ...]:
        return tuple(self.weights + k + self.state for k in self.kv)


def context_memory(cfg: ModelConfig, tokens: tuple[int, ...], batch: int = 1, dtype: str = "bf16") -> ContextMemory:
    """Weights, KV cache (attention layers) and recurrent state of cfg at every context in `tokens`."""
    require(choice_problem("dtype", dtype, DTYPE_BYTES), int_problem("batch", batch),
            int_problem("tokens", max(tokens, default=1)))
    parts = state_bytes(cfg, batch, dtype)
    kv = tuple(kv_cache_bytes(cfg, batch, t, dtype) for t in tokens)
    return ContextMemory(tuple(tokens), count_params(cfg).total * DTYPE_BYTES[dtype], kv,
                         parts["conv"] + parts["recurrent"])


def inference_bytes(cfg: ModelConfig, tokens: int, batch: int = 1, dtype: str = "bf16") -> int:
    """Weights + KV cache + state at one context (memory_budget's inference total without the training terms)."""
    return context_memory(cfg, (tokens,), batch, dtype).totals[0]


def crossing(cfg: ModelConfig, memory_bytes: int, max_tokens: int, batch: int = 1, dtype: str = "bf16") -> int | None:
    """The first context (0 .. max_tokens tokens) at which weights + KV + state exceed memory_bytes: 0 when the
    weights and state alone do, None when even max_tokens fits."""
    fixed = context_memory(cfg, (), batch, dtype)
    base = fixed.weights + fixed.state
    if base > memory_bytes:
        return 0
    if base + kv_cache_bytes(cfg, batch, max_tokens, dtype) <= memory_bytes:
        return None
    lo, hi = 0, max_tokens        # total(lo) fits, total(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if base + kv_cache_bytes(cfg, batch, mid, dtype) > memory_bytes:
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class Crossing:
    """Where one device (or `gpus` of them) runs out of memory: the first context for cfg and for all_attention(cfg)
    (0: the weights alone do not fit, None: the longest context fits; the same for a model without recurrent
    layers)."""
    device: str
    memory_bytes: int
    tokens: int | None
    all_attention_tokens: int | None


def memory_devices() -> list[str]:
    """The accelerator profiles (engine/budget/devices.py) with a memory of their own."""
    return [name for name, p in DEVICE_PROFILES.items() if p.memory_bytes is not None]


def crossings(cfg: ModelConfig, max_tokens: int, batch: int = 1, dtype: str = "bf16", gpus: int = 1,
              devices: Sequence[str] | None = None) -> list[Crossing]:
    """crossing for each of `devices` (None: every memory_devices one), `gpus` of them pooled (weights and cache
    split across them, as tensor parallelism does, with nothing else held)."""
    names = memory_devices() if devices is None else list(devices)
    require(int_problem("gpus", gpus), int_problem("max_tokens", max_tokens),
            *(f"devices: {n!r} is not one of {', '.join(memory_devices())}"
              for n in names if n not in memory_devices()))
    dense = all_attention(cfg)
    out = []
    for name in names:
        p = DEVICE_PROFILES[name]
        memory = gpus * p.memory_bytes
        label = name if gpus == 1 else f"{gpus} × {name}"
        tokens = crossing(cfg, memory, max_tokens, batch, dtype)
        out.append(Crossing(label, memory, tokens,
                            tokens if dense is cfg else crossing(dense, memory, max_tokens, batch, dtype)))
    return out
