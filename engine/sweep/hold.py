"""Equal-parameter sweeps: solve d_ff or d_model so a point keeps the base's total (or non-embedding) count; and
the transformer of a hybrid at equal parameters (every mixer layer attention, the FFN width solved).

d_ff: every count is linear in d_ff (dense 2*d*f + biases, gated 3*d*f + biases), so two counts give the line
and the exact solution, rounded to the nearest multiple of ffn_multiple_of: the total lands within half a step
(ffn_multiple_of x the parameters one unit of d_ff adds) of the target.
d_model: counts grow monotonically with d_model; the nearest of the widths that keep whole, even-width heads
(multiples of 2 x n_heads when head_dim follows d_model, else of 8) is found by bisection.
"""
from __future__ import annotations

from engine.budget.params import count_params
from engine.config import ConfigError, ModelConfig
from engine.layers.layer_map import with_attention_layers

HOLD_FIELDS = ("d_ff", "d_model")
HOLD_TARGETS = ("total", "non_embedding")


def held_count(cfg: ModelConfig, target: str) -> int:
    pc = count_params(cfg)
    return pc.total if target == "total" else pc.non_embedding


def d_ff_step(cfg: ModelConfig, target: str = "total") -> int:
    """Parameters one ffn_multiple_of step of d_ff adds: the equal-parameter tolerance."""
    one = held_count(cfg.replace(d_ff=2), target) - held_count(cfg.replace(d_ff=1), target)
    return one * cfg.ffn_multiple_of


def _solve_width(cfg: ModelConfig, target_name: str, target: int, field: str = "d_ff") -> ModelConfig:
    """A width every count is linear in (d_ff, expert_d_ff): two counts give the line, the solution is rounded to
    ffn_multiple_of for d_ff, to a whole number for expert_d_ff."""
    at1 = held_count(cfg.replace(**{field: 1}), target_name)
    slope = held_count(cfg.replace(**{field: 2}), target_name) - at1
    if slope == 0:
        what = "dense FFN" if field == "d_ff" else "expert"
        raise ConfigError([f"{field}: no {what} in this config uses {field}"
                           + (" (every layer is MoE); hold d_model instead" if field == "d_ff" else "")])
    exact = 1 + (target - at1) / slope
    m = cfg.ffn_multiple_of if field == "d_ff" else 1
    f = m * round(exact / m)
    if f < 1:
        raise ConfigError([f"{field}: no width keeps {target_name} parameters at {target:,}: the rest of this config "
                           f"already has {at1 - slope:,} ({field} would be {exact:,.0f})"])
    return cfg.replace(**{field: f})


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
    return (_solve_width if field == "d_ff" else _solve_d_model)(cfg, target_name, target)


def equal_params_transformer(cfg: ModelConfig) -> ModelConfig:
    """cfg with softmax attention in every mixer layer (engine/layers/layer_map.py with_attention_layers) and its
    FFN width solved so the total count is cfg's, within one step of that width: d_ff when a dense FFN uses it,
    else the experts' expert_d_ff. The transformer a hybrid is compared against."""
    n = sum(bool(s.mixers) for s in cfg.layer_specs)
    plain = with_attention_layers(cfg, n)
    field = "d_ff" if any(s.ffn == "dense" for s in plain.layer_specs) else "expert_d_ff"
    solved = _solve_width(plain, "total", count_params(cfg).total, field)
    return solved.replace(name=f"{cfg.name} as a transformer (equal parameters)")
