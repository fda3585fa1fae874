"""The Trade-offs page's sweep as URL params and back (pure: tested without Streamlit).

`?knob=n_kv_heads&values=1,2,4,8,32&hold=d_ff&x=kv_cache_bytes&y=val_loss` reproduces the sweep and the Pareto
axes; the knob and the values that differ from SweepSpec's defaults are written. A bad value is reported naming its key and
dropped; the rest of the link applies.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from engine.config import ConfigError, ModelConfig, parse_bool
from engine.sweep import (HOLD_FIELDS, HOLD_TARGETS, KNOBS, METRICS, Sweep, SweepSettings, d_ff_step, parse_values,
                          run_sweep)
from engine.sweep.measured import MEASURED
from engine.train.small import small_version

AXES = (*METRICS, *MEASURED)


@dataclass(frozen=True)
class SweepSpec:
    knob: str = "n_kv_heads"
    values: str = ""              # comma-separated; empty: the knob's default grid
    knob2: str = ""               # empty: one knob
    values2: str = ""
    hold: str = ""                # empty, d_ff or d_model
    hold_target: str = "total"
    context: int = 0              # 0: each point's context_length
    small: bool = False           # sweep the config's architecture at the small training size
    x: str = "kv_cache_bytes"
    y: str = "total_params"


URL_KEYS = tuple(f.name for f in fields(SweepSpec))
_DEFAULT = SweepSpec()


def _check(key: str, value: str) -> object:
    """The typed value of one URL param, or ValueError naming the key."""
    choices = {"hold": ("", *HOLD_FIELDS), "hold_target": HOLD_TARGETS, "x": AXES, "y": AXES}
    if key in ("knob", "knob2"):
        if value not in KNOBS and not (key == "knob2" and value == ""):
            raise ValueError(f"{key}: {value!r} is not a config field one can sweep")
        return value
    if key in choices:
        if value not in choices[key]:
            raise ValueError(f"{key}: {value!r} is not one of {', '.join(c for c in choices[key] if c)}")
        return value
    if key == "context":
        if not value.isdigit():
            raise ValueError(f"context: {value!r} is not an integer >= 0 (0: each point's context_length)")
        return int(value)
    if key == "small":
        on = parse_bool(value)
        if on is None:
            raise ValueError(f"small: {value!r} is not true or false")
        return on
    return value


def spec_from_params(params: dict[str, str]) -> tuple[SweepSpec, list[str]]:
    """(spec, problems) from URL params; unknown keys are someone else's and ignored."""
    values, problems = {}, []
    for key in URL_KEYS:
        if key in params:
            try:
                values[key] = _check(key, params[key])
            except ValueError as e:
                problems.append(str(e))
    return replace(_DEFAULT, **values), problems


def spec_to_params(spec: SweepSpec) -> dict[str, str]:
    """The URL params of `spec`: the knob (a link always says what it sweeps) and keys that differ from the
    defaults."""
    out = {}
    for key, value in asdict(spec).items():
        if value != getattr(_DEFAULT, key) or key == "knob":
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def sweep_base(cfg: ModelConfig, spec: SweepSpec) -> ModelConfig:
    return small_version(cfg) if spec.small else cfg


def run_spec(cfg: ModelConfig, spec: SweepSpec) -> Sweep:
    """The closed-form sweep the spec describes; ConfigError with every problem, each naming its setting."""
    knobs = {}
    for key, knob, text in (("values", spec.knob, spec.values), ("values2", spec.knob2, spec.values2)):
        if knob and knob not in knobs:
            parts = [t for t in text.split(",") if t.strip()]
            try:
                knobs[knob] = parse_values(knob, parts) if parts else None
            except ValueError as e:   # ConfigError included
                raise ConfigError([f"{key}: {e}"]) from None
    settings = SweepSettings(context=spec.context or None)
    return run_sweep(sweep_base(cfg, spec), knobs, settings, spec.hold or None, spec.hold_target)


def held_text(sweep: Sweep) -> str:
    """What an equal-parameter sweep holds and how closely ('' for sizes as given): d_ff is rounded to a multiple
    of ffn_multiple_of, so the held count moves by up to half a step of it between points."""
    if not sweep.hold:
        return ""
    what = f"{sweep.hold} solved at each point to keep {sweep.hold_target.replace('_', '-')} parameters at " \
           f"{sweep.target:,}"
    if sweep.hold == "d_ff":
        step = max(d_ff_step(p.config, sweep.hold_target) for p in sweep.points if p.config is not None)
        return f"{what} (d_ff is a multiple of {sweep.base.ffn_multiple_of:,}: within ±{step // 2:,})"
    return f"{what} (the nearest d_model with whole heads)"
