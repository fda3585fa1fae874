"""A closed-form sweep: a base config, one or two knobs and their values -> one row of metrics per point.

Every point is `base` with the knob values applied (and, in equal-parameter mode, d_ff or d_model solved so the
total or non-embedding count stays at the base's). A point the config rejects is kept, with the field-named
messages of that rejection, so a table never hides a value silently. Metrics (all exact closed forms):
  total_params, non_embedding_params   count_params (== the built model's parameters())
  active_params                        parameters one token passes through (MoE: top-k experts; dense: total)
  weights_bytes                        total_params * bytes of `dtype`
  kv_cache_bytes                       2 * layer-tokens held * batch * kv_heads * head_dim * bytes, at `context`
  flops_per_token                      training (forward + backward) FLOPs per token of a batch x context step,
                                       counting the query-key pairs a causal, windowed kernel computes
  train_memory_bytes                   weights + grads + optimizer + master + activations under `policy`
  state_bytes                          recurrent layers' conv window + state per sequence x batch (vLLM's convention)
A layout knob (grid.LAYOUT_KNOBS: attention_layers) is applied after the fields, before any equal-parameter solve.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from engine.budget.flops import headline_flops
from engine.budget.memory import OPTIMIZERS, POLICIES, memory_budget
from engine.budget.params import count_params
from engine.config import ConfigError, ModelConfig, coerce
from engine.runtime import DTYPE_BYTES
from engine.sweep.grid import KNOBS, LAYOUT_KNOBS, default_values, value_label
from engine.sweep.hold import HOLD_FIELDS, HOLD_TARGETS, solve

MAX_POINTS = 400


@dataclass(frozen=True)
class Metric:
    label: str
    unit: str          # parameters | bytes | FLOP | ms | nats
    how: str


METRICS: dict[str, Metric] = {
    "total_params": Metric("total parameters", "parameters", "exact count, equal to the built model's"),
    "non_embedding_params": Metric("non-embedding parameters", "parameters",
                                   "total minus token embedding, learned positions and an untied head"),
    "active_params": Metric("active parameters per token", "parameters",
                            "parameters one token passes through: total minus the routed experts it skips"),
    "weights_bytes": Metric("weights", "bytes", "total parameters x bytes per element of the dtype"),
    "kv_cache_bytes": Metric("KV cache", "bytes", "2 x layer-tokens held x batch x kv_heads x head_dim x bytes "
                                                  "(a window layer holds at most its window)"),
    "flops_per_token": Metric("training FLOPs per token", "FLOP",
                              "(forward + backward) / tokens of one batch x context step; causal query-key pairs"),
    "train_memory_bytes": Metric("training memory", "bytes",
                                 "weights + grads + optimizer state + master copy + saved activations"),
    "state_bytes": Metric("recurrent state", "bytes", "conv window + recurrent state of every recurrent layer x batch "
                                                      "(vLLM's convention), whatever the context"),
}


@dataclass(frozen=True)
class SweepSettings:
    """Where the metrics are taken: KV cache, FLOPs and training memory at batch x context tokens."""
    context: int | None = None      # None: each point's own context_length
    batch: int = 1
    dtype: str = "bf16"             # weights and KV cache bytes, activations
    policy: str = "mixed-bf16"      # training state
    optimizer: str = "adamw"

    def __post_init__(self) -> None:
        problems = []
        for name in ("context", "batch"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                problems.append(f"{name}: {v!r} is not an integer >= 1")
        for name, allowed in (("dtype", tuple(DTYPE_BYTES)), ("policy", POLICIES), ("optimizer", OPTIMIZERS)):
            if getattr(self, name) not in allowed:
                problems.append(f"{name}: {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        if problems:
            raise ConfigError(problems)


@dataclass(frozen=True)
class Point:
    values: dict[str, Any]                 # knob -> value
    config: ModelConfig | None             # None when the point is invalid
    metrics: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)   # field-named reasons the point is invalid
    solved: dict[str, int] = field(default_factory=dict)  # equal-parameter mode: the solved field's value

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={value_label(k, v)}" for k, v in self.values.items())


@dataclass(frozen=True)
class Sweep:
    base: ModelConfig
    knobs: tuple[str, ...]
    points: list[Point]
    settings: SweepSettings
    hold: str | None = None              # the solved field (d_ff or d_model), None: sizes as given
    hold_target: str = "total"           # which count is held: total or non_embedding
    target: int | None = None            # that count of the base

    def rows(self) -> list[dict[str, Any]]:
        """One flat dict per point (valid or not): knob values, solved field, metrics, problems."""
        out = []
        for p in self.points:
            row = {**p.values, **({self.hold: p.solved.get(self.hold)} if self.hold else {}), "valid": p.valid}
            row.update({k: p.metrics.get(k) for k in METRICS})
            row["problems"] = list(p.problems)
            out.append(row)
        return out


def metrics(cfg: ModelConfig, s: SweepSettings) -> dict[str, float]:
    context = cfg.context_length if s.context is None else s.context
    pc = count_params(cfg)
    mem = memory_budget(cfg, s.batch, context, s.dtype, s.policy, s.optimizer)
    return {"total_params": pc.total, "non_embedding_params": pc.non_embedding, "active_params": pc.active,
            "weights_bytes": pc.total * DTYPE_BYTES[s.dtype], "kv_cache_bytes": mem.kv_cache_bytes,
            "flops_per_token": headline_flops(cfg, s.batch, context).flops_per_token,
            "train_memory_bytes": mem.train_total_bytes, "state_bytes": mem.state_bytes}


def parse_values(knob: str, texts: list[str]) -> list[Any]:
    """Knob values from strings (CLI, URL), each converted by the field's own declaration."""
    check_knob(knob)
    if knob in LAYOUT_KNOBS:
        bad = [t for t in texts if not t.strip().isdigit()]
        if bad:
            raise ConfigError([f"{knob}: {bad[0]!r} is not a whole number >= 0"])
        return [int(t) for t in texts]
    return [coerce(knob, t) for t in texts]


def check_knob(knob: str) -> None:
    if knob not in KNOBS:
        import difflib
        near = difflib.get_close_matches(knob, KNOBS, n=1)
        raise ConfigError([f"knob: {knob!r} is not a config field one can sweep"
                           + (f" (did you mean {near[0]}?)" if near else "")])


def _point(base: ModelConfig, values: dict[str, Any], s: SweepSettings, hold: str | None, hold_target: str,
           target: int | None) -> Point:
    name = f"{base.name} " + ", ".join(f"{k}={value_label(k, v)}" for k, v in values.items())
    try:
        cfg = base.replace(**{k: v for k, v in values.items() if k not in LAYOUT_KNOBS}, name=name)
        for k, v in values.items():
            if k in LAYOUT_KNOBS:
                cfg = LAYOUT_KNOBS[k].apply(cfg, v)
        solved = {}
        if hold is not None:
            cfg = solve(cfg, hold, hold_target, target)
            solved = {hold: getattr(cfg, hold)}
        context = cfg.context_length if s.context is None else s.context
        if cfg.position == "learned" and context > cfg.context_length:
            raise ConfigError([f"context: {context} exceeds context_length={cfg.context_length} "
                               f"(learned positions have no row for it)"])
        return Point(values, cfg, metrics(cfg, s), solved=solved)
    except ConfigError as e:
        return Point(values, None, problems=e.problems)
    except ValueError as e:   # a valid config an estimate does not cover (MLA's activations with dropout)
        return Point(values, None, problems=[str(e)])


def run_sweep(base: ModelConfig, knobs: dict[str, list[Any] | None], settings: SweepSettings | None = None,
              hold: str | None = None, hold_target: str = "total") -> Sweep:
    """Every combination of the knobs' values (None: default_values) as a Point with its closed-form metrics.

    hold='d_ff' or 'd_model' solves that field at each point so the `hold_target` count (total or
    non_embedding) stays at the base's; invalid points carry their problems instead of metrics."""
    s = settings or SweepSettings()
    if not 1 <= len(knobs) <= 2:
        raise ConfigError([f"knob: give one or two knobs, got {len(knobs)}"])
    for k in knobs:
        check_knob(k)
    problems = []
    if hold is not None and hold not in HOLD_FIELDS:
        problems.append(f"hold: {hold!r} is not one of {', '.join(HOLD_FIELDS)}")
    elif hold in knobs:
        problems.append(f"hold: cannot solve for {hold} while sweeping it; hold the other size field")
    if hold_target not in HOLD_TARGETS:
        problems.append(f"hold_target: {hold_target!r} is not one of {', '.join(HOLD_TARGETS)}")
    grid = {k: default_values(base, k) if v is None else list(v) for k, v in knobs.items()}
    for k, v in grid.items():
        if not v:
            problems.append(f"values: no values for {k}")
    n = 1
    for v in grid.values():
        n *= len(v)
    if n > MAX_POINTS:
        problems.append(f"values: {' x '.join(str(len(v)) for v in grid.values())} = {n:,} points; "
                        f"at most {MAX_POINTS}")
    if problems:
        raise ConfigError(problems)
    target = None
    if hold is not None:
        pc = count_params(base)
        target = pc.total if hold_target == "total" else pc.non_embedding
    points = [_point(base, dict(zip(grid, combo)), s, hold, hold_target, target)
              for combo in itertools.product(*grid.values())]
    return Sweep(base, tuple(grid), points, s, hold, hold_target, target)


def pareto_front(rows: list[dict[str, Any]], x: str, y: str) -> list[int]:
    """Indices of the rows no other row beats on both x and y (lower is better for every sweep metric: bytes,
    parameters, FLOPs, latency, loss); rows missing either value are left out."""
    have = [i for i, r in enumerate(rows) if r.get(x) is not None and r.get(y) is not None]

    def beaten(i: int) -> bool:
        a = rows[i]
        return any(rows[j][x] <= a[x] and rows[j][y] <= a[y] and (rows[j][x], rows[j][y]) != (a[x], a[y])
                   for j in have)
    return [i for i in have if not beaten(i)]
