"""Default values of a sweep knob, read from the field's declaration in engine/config.py.

A choice knob takes every declared choice, a bool both values, an optional bool (norm_bias) null and both
values (null takes the value another field implies, e.g. the norm's own bias). Numeric knobs get a grid that
means something for that field (a layout knob, attention_layers, its own grid): the divisors of n_heads for n_kv_heads (every valid MHA/GQA/MQA setting), powers of two below
the context for the sliding window (and null, full attention), powers of two for global_every; any other number
is scaled by 1/4 .. 4 (integers) or 1/10 .. 10 (floats) around the base value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.config import FIELDS, ModelConfig
from engine.layers.layer_map import with_attention_layers


@dataclass(frozen=True)
class LayoutKnob:
    """A knob that is not one config field: an integer that rewrites the per-layer lists (layer_types)."""
    help: str
    grid: Callable[[ModelConfig], list[int]]
    apply: Callable[[ModelConfig, int], ModelConfig]


def _attention_layer_grid(base: ModelConfig) -> list[int]:
    """None, one, an eighth, a quarter (Qwen3-Next's 3:1), half and all of the mixer layers."""
    n = sum(bool(s.mixers) for s in base.layer_specs)
    return sorted({0, min(1, n), n // 8, n // 4, n // 2, n})


LAYOUT_KNOBS: dict[str, LayoutKnob] = {
    "attention_layers": LayoutKnob(
        "Softmax attention layers out of the N mixer layers, spread evenly (one closing each group, as Qwen3-Next's "
        "every fourth); the others the config's recurrent kind (Gated DeltaNet when it has none); FFNs unchanged "
        "(engine/layers/layer_map.py with_attention_layers).", _attention_layer_grid, with_attention_layers),
}
# every declared scalar field but the label (per-layer lists such as layer_types are not one value to sweep), and the
# layout knobs that rewrite those lists
KNOBS = tuple(name for name, spec in FIELDS.items() if name != "name" and spec.type in (int, float, bool, str)) + tuple(
    LAYOUT_KNOBS)
MAX_WINDOWS = 8                                            # the largest powers of two below the context
_SOFTCAPS = (None, 10.0, 30.0, 50.0)                       # Gemma-2 uses 50 (attention) and 30 (logits)
_FRACTIONS = (0.25, 0.5, 1.0)
_DROPOUTS = (0.0, 0.1, 0.2)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _powers_of_two(lo: int, hi: int) -> list[int]:
    """2^k with lo <= 2^k <= hi."""
    out, p = [], 1
    while p <= hi:
        if p >= lo:
            out.append(p)
        p *= 2
    return out


def _scaled_ints(v: int, lo: float | None) -> list[int]:
    values = sorted({max(1, round(v * f)) for f in (0.25, 0.5, 1, 2, 4)})
    return [x for x in values if lo is None or x >= lo]


def default_values(base: ModelConfig, knob: str) -> list[Any]:
    """The values a sweep of `knob` takes when none are given (ordered as a chart's x axis reads them)."""
    if knob not in KNOBS:
        raise ValueError(f"knob: {knob!r} is not a config field one can sweep")
    if knob in LAYOUT_KNOBS:
        return LAYOUT_KNOBS[knob].grid(base)
    spec = FIELDS[knob]
    if spec.choices:
        return list(spec.choices)
    if spec.type is bool:
        return [None, False, True] if spec.optional else [False, True]
    if knob == "n_kv_heads":
        return _divisors(base.n_heads)
    if knob == "attn_window":
        return _powers_of_two(2, base.context_length - 1)[-MAX_WINDOWS:] + [None]
    if knob == "global_every":
        return [None] + _powers_of_two(2, base.n_layers)
    if knob in ("attn_softcap", "logit_softcap"):
        return list(_SOFTCAPS)
    if knob == "rope_fraction":
        return list(_FRACTIONS)
    if knob == "dropout":
        return list(_DROPOUTS)
    if knob == "d_ff":
        return _scaled_ints(base.ffn_width, spec.lo)
    if knob == "head_dim":
        return _scaled_ints(base.head_width, spec.lo)
    if knob == "n_experts":
        return [None, 4, 8, 16, 32, 64]
    if knob == "experts_per_token":
        return [1, 2, 4, 8]
    current = getattr(base, knob)
    if current is None:                       # an optional size left at its default (e.g. expert_d_ff)
        return [None] + _scaled_ints(base.ffn_width, spec.lo)
    if spec.type is int:
        return _scaled_ints(current, spec.lo)
    return [current * f for f in (0.1, 1.0, 10.0)]


def value_label(knob: str, value: Any) -> str:
    """How a knob value reads on an axis or in a table: null says what it means (attn_window=null is full)."""
    if value is None and knob not in LAYOUT_KNOBS:
        if FIELDS[knob].type is bool:                                # an optional bool: null follows another field
            return "follow norm" if knob == "norm_bias" else "auto"
        return {"attn_window": "full", "n_kv_heads": "MHA", "global_every": "none", "d_ff": "auto",
                "head_dim": "auto", "n_experts": "dense"}.get(knob, "auto" if FIELDS[knob].type is int else "off")
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
