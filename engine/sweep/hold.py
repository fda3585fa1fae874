"""Equal-parameter sweeps: solve d_ff or d_model so a point keeps the base's total (or non-embedding) count.

d_ff: every count is linear in d_ff (dense 2*d*f + biases, gated 3*d*f + biases), so two counts give the line
and the exact solution, rounded to the nearest multiple of ffn_multiple_of: the total lands within half a step
(ffn_multiple_of x the parameters one unit of d_ff adds) of the target.
d_model: counts grow monotonically with d_model; the nearest of the widths that keep whole, even-width heads
(multiples of 2 x n_heads when head_dim follows d_model, else of 8) is found by bisection.
"""
from __future__ import annotations

from engine.budget.params import count_params
from engine.config import ConfigError, ModelConfig

HOLD_FIELDS = ("d_ff", "d_model")
HOLD_TARGETS = ("total", "non_embedding")


def held_count(cfg: ModelConfig, target: str) -> int:
    pc = count_params(cfg)
    return pc.total if target == "total" else pc.non_embedding


def d_ff_step(cfg: ModelConfig, target: str = "total") -> int:
    """Parameters one ffn_multiple_of step of d_ff adds: the equal-parameter tolerance."""
    one = held_count(cfg.replace(d_ff=2), target) - held_count(cfg.replace(d_ff=1), target)
    return one * cfg.ffn_multiple_of


def _solve_d_ff(cfg: ModelConfig, target_name: str, target: int) -> ModelConfig:
    at1 = held_count(cfg.replace(d_ff=1), target_name)
    slope = held_count(cfg.replace(d_ff=2), target_name) - at1
    if slope == 0:
        raise ConfigError(["d_ff: no dense FFN in this config uses d_ff (every layer is MoE); hold d_model instead"])
    exact = 1 + (target - at1) / slope
    m = cfg.ffn_multiple_of
    f = m * round(exact / m)
    if f < 1:
        raise ConfigError([f"d_ff: no width keeps {target_name} parameters at {target:,}: the rest of this config "
                           f"already has {at1 - slope:,} (d_ff would be {exact:,.0f})"])
    return cfg.replace(d_ff=f)


def _solve_d_model(cfg: ModelConfig, target_name: str, target: int) -> ModelConfig:
    step = 2 * cfg.n_heads if cfg.head_dim is None else 8

    def count(k: int) -> int:
        return held_count(cfg.replace(d_model=k * step), target_name)

    lo, hi = 1, 1
    while count(hi) < target:
        lo, hi = hi, hi * 2
        if hi > 1 << 20:
            raise ConfigError([f"d_model: no width up to {hi * step:,} reaches {target:,} {target_name} parameters"])
    while hi - lo > 1:                           # count(lo) < target <= count(hi), unless lo == hi == 1
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(mid) < target else (lo, mid)
    k = min((lo, hi), key=lambda k: abs(count(k) - target))
    return cfg.replace(d_model=k * step)


def solve(cfg: ModelConfig, field: str, target_name: str, target: int) -> ModelConfig:
    """`cfg` with `field` (d_ff or d_model) set so its `target_name` count is as close to `target` as the
    field's grid allows; ConfigError naming the field when no width does."""
    return (_solve_d_ff if field == "d_ff" else _solve_d_model)(cfg, target_name, target)
