"""RoPE keys of a Hugging Face config.json -> rope_base, rope_fraction and the rope_scaling* fields, read the way
transformers' rope init functions read them (rope_parameters in transformers 5, rope_scaling before, the legacy
top-level keys, and Gemma-3's per-layer-type mapping). `r` is hf_config's reader: it tracks the keys read,
the keys ignored and one problem per key we cannot express.
"""
from __future__ import annotations

import math
from typing import Any


def rope_fields(r: Any, head_dim: int, *, theta_keys=("rope_theta",), fraction_keys=("partial_rotary_factor",),
          fraction_default: float = 1.0, partial_ok: bool = False, theta_default: float = 10000.0) -> dict[str, Any]:
    """rope_base, rope_fraction and the scaling fields from rope_parameters (transformers 5), rope_scaling
    (earlier releases) or the legacy top-level keys."""
    source = "rope_scaling" if r.d.get("rope_scaling") else "rope_parameters"
    params = r.d.get(source) or {}
    r.read.update({"rope_scaling", "rope_parameters", *theta_keys, *fraction_keys})   # both mappings (hf_types)
    local: dict[str, Any] = {}
    if source == "rope_parameters" and {"full_attention", "sliding_attention"} & set(params):   # per layer type
        local = dict(params.get("sliding_attention") or {})
        params = dict(params.get("full_attention") or {})
        source = "rope_parameters.full_attention"   # where the file holds the keys of params
        if local.get("rope_type", "default") != "default":
            r.bad("rope_parameters.sliding_attention.rope_type", local["rope_type"], "local layers use plain RoPE")
    theta = params.get("rope_theta", next((r.d[k] for k in theta_keys if r.d.get(k) is not None),
                                          r.defaults.get("rope_theta", theta_default)))
    fraction_key, fraction = _fraction(r, source, params, fraction_keys, fraction_default)
    if fraction != 1.0 and not partial_ok:
        _bad_fraction(r, fraction_key, fraction, f"{r.family} rotates the whole head")
        fraction = 1.0
    rope_fraction = _rotary_fraction(r, head_dim, fraction_key, fraction)
    scaling = rope_scaling_fields(r, source, params)
    if "rope_theta" in local:
        scaling["rope_local_base"] = float(local["rope_theta"])
    return dict(rope_base=float(theta), rope_fraction=rope_fraction, **scaling)


def _fraction(r: Any, source: str, params: dict[str, Any], keys: tuple[str, ...],
              default: float) -> tuple[str | None, Any]:
    """The rotary fraction and the file's key for it (rotary_pct for GPT-NeoX): the rope mapping's own, else the
    first top-level key set; (None, default) when the file gives none."""
    if "partial_rotary_factor" in params:
        return f"{source}.partial_rotary_factor", params["partial_rotary_factor"]
    key = next((k for k in keys if r.d.get(k) is not None), None)
    return key, default if key is None else r.d[key]


def _rotary_fraction(r: Any, head_dim: int, key: str | None, fraction: float) -> float:
    """rope_fraction: the share of each head transformers rotates (it truncates head_dim * fraction); 1.0 with a
    problem when that is no dimension or an odd number of them."""
    if head_dim <= 0:   # no head to rotate: ModelConfig's problem then names the size's own key, not the fraction
        return 1.0
    rotary_dim = int(head_dim * fraction)
    if rotary_dim <= 0:
        _bad_fraction(r, key, fraction, "rotates no dimension of the head")
        return 1.0
    # an odd share: transformers then turns rotary_dim + 1 dims at frequencies spaced for rotary_dim
    if rotary_dim % 2 and fraction != 1.0:
        _bad_fraction(r, key, fraction, f"rotates an odd {rotary_dim} of the {head_dim} head dimensions")
        return 1.0
    return rotary_dim / head_dim


def _bad_fraction(r: Any, key: str | None, fraction: float, why: str) -> None:
    """A fraction the file gives is refused at its key; the family's default, for the file as a whole (it is the
    head width the file sets that the default does not fit)."""
    if key is None:
        r.problems.append(f"config.json: the {r.family} default rotary fraction {fraction!r} is not expressible "
                          f"({why})")
    else:
        r.bad(key, fraction, why)


# per scaling type: the rope_parameters keys transformers reads (besides rope_type, rope_theta, the fraction)
_SCALING_KEYS = {
    "default": set(), "linear": {"factor"}, "dynamic": {"factor"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
    "yarn": {"factor", "beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate",
             "original_max_position_embeddings"},
    "longrope": {"factor", "short_factor", "long_factor", "attention_factor", "original_max_position_embeddings"}}


def rope_scaling_fields(r: Any, source: str, params: dict[str, Any]) -> dict[str, Any]:
    """The rope_scaling* fields for one rope_parameters mapping, read as transformers' rope init functions do:
    yarn and longrope without a factor take max_position_embeddings / original; a top-level
    original_max_position_embeddings (Phi-3) wins over the one inside the mapping."""
    r.read.add("original_max_position_embeddings")   # before any refusal: it is not also an unknown key
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in _SCALING_KEYS:   # named as the file spells it: rope_type, or the older type
        key = "rope_type" if "rope_type" in params else "type"
        r.bad(f"{source}.{key}", kind, f"supported RoPE types: {', '.join(_SCALING_KEYS)}")
        return {}
    for extra in sorted(set(params) - _SCALING_KEYS[kind] - {"rope_type", "type", "rope_theta",
                                                              "partial_rotary_factor"}):
        if extra in set().union(*_SCALING_KEYS.values()):   # another type's key: transformers does not read it
            r.ignore(f"{source}.{extra}", f"not used by rope_type {kind}")
        else:
            r.bad(f"{source}.{extra}", params[extra], f"not a {kind} RoPE parameter we model")
    if kind == "default":
        if "original_max_position_embeddings" in r.d:
            r.ignore("original_max_position_embeddings", "plain RoPE does not read it")
        return dict(rope_scaling="none")
    top = r("original_max_position_embeddings")   # top level (Phi-3's class has it, default 4096) wins
    original = top or params.get("original_max_position_embeddings") or r("max_position_embeddings")
    out: dict[str, Any] = dict(rope_scaling=kind)
    if kind in ("llama3", "yarn", "longrope"):
        out["rope_original_context"] = int(original)
    elif top is not None:
        r.ignore("original_max_position_embeddings", f"rope_type {kind} does not read it")
    factor = params.get("factor")
    if factor is None and kind in ("yarn", "longrope"):
        factor = r("max_position_embeddings") / original
    if factor is None:
        r.bad(f"{source}.factor", None, f"rope_type {kind} needs a factor")
        return out
    out["rope_factor"] = float(factor)
    if kind == "llama3":
        out.update(rope_low_freq_factor=float(params.get("low_freq_factor", 1.0)),
                   rope_high_freq_factor=float(params.get("high_freq_factor", 4.0)))
    if kind == "yarn":
        out.update(rope_beta_fast=float(params.get("beta_fast") or 32),
                   rope_beta_slow=float(params.get("beta_slow") or 1), rope_truncate=bool(params.get("truncate", True)))
        mscale, mscale_all = params.get("mscale"), params.get("mscale_all_dim")
        if params.get("attention_factor") is None and mscale and mscale_all:   # DeepSeek's ratio of two mscales
            def m(k: float) -> float:
                return 1.0 if factor <= 1 else 0.1 * k * math.log(factor) + 1.0
            out["rope_attention_factor"] = m(mscale) / m(mscale_all)
    if kind in ("yarn", "longrope") and params.get("attention_factor") is not None:
        out["rope_attention_factor"] = float(params["attention_factor"])
    if kind == "longrope":
        out.update(rope_short_factor=params.get("short_factor"), rope_long_factor=params.get("long_factor"))
    return out
