"""A config's architecture at a size a CPU trains in seconds: what the Training page, sweeps and `--small` train."""
from __future__ import annotations

from engine.config import ModelConfig
from engine.layers.kv_heads import kv_head_choices


def small_version(cfg: ModelConfig, d_model: int = 64, n_layers: int = 2, n_heads: int = 4) -> ModelConfig:
    """The config's architecture knobs (norms, FFN, positions, attention kind, layout) at a size a CPU trains
    in seconds: MHA stays MHA, MQA stays MQA, GQA becomes kv_head_choices' GQA at n_heads, with groups of 2
    query heads allowed (4 heads -> GQA-2)."""
    kind = cfg.attention_kind[:3]
    choices = kv_head_choices(n_heads, min_group=2)
    kv = next((k for name, k in choices.items() if name.startswith(kind)), n_heads)
    kv = None if kv == n_heads else kv
    return cfg.replace(name=f"{cfg.name}-small", d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                       n_kv_heads=kv, head_dim=None, d_ff=None, ffn_multiple_of=8, expert_d_ff=None,
                       shared_d_ff=None, moe_first_dense=min(cfg.moe_first_dense or 0, n_layers - 1) or None,
                       moe_every=min(cfg.moe_every, n_layers),
                       **_per_layer_lists(cfg, n_layers), **_per_frequency_lists(cfg, d_model // n_heads))


def _per_layer_lists(cfg: ModelConfig, n_layers: int) -> dict:
    """The first n_layers layers' pattern: their attention types and which of them skip RoPE."""
    nope = tuple(i for i in cfg.nope_layers or () if i <= n_layers) or None
    return dict(layer_types=cfg.layer_types and cfg.layer_types[:n_layers], nope_layers=nope)


def _per_frequency_lists(cfg: ModelConfig, head_dim: int) -> dict:
    """LongRoPE's factor lists (one per rotated frequency) resampled, evenly over the original frequencies from
    fastest to slowest, to the smaller head's rotary_dim / 2 frequencies."""
    m = int(round(head_dim * cfg.rope_fraction)) // 2

    def resample(factors: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if not factors or m < 1:
            return factors
        last = len(factors) - 1
        return tuple(factors[round(i * last / max(1, m - 1))] for i in range(m))
    return dict(rope_short_factor=resample(cfg.rope_short_factor), rope_long_factor=resample(cfg.rope_long_factor))
