"""Small choices of the Budgets page: which attention variants to overlay on the KV-cache chart and the
context-length grid. Pure functions, tested directly."""
from __future__ import annotations

from engine.config import ConfigError, ModelConfig
from engine.layers.attention import attention_variants


def kv_variants(cfg: ModelConfig) -> dict[str, ModelConfig]:
    """The current config, its MHA/GQA/MQA siblings (engine.layers.attention.attention_variants) and a sliding
    window variant: the config's own window without global layers, else a quarter of the context."""
    out = {f"current ({cfg.attention_kind}{', window' if cfg.attn_window else ''})": cfg}
    for name, v in attention_variants(cfg).items():
        full = v.replace(attn_window=None, global_every=None)
        if full != cfg:
            out[f"{name}, full attention"] = full
    window = cfg.attn_window or max(1, cfg.context_length // 4)
    try:
        out[f"{cfg.attention_kind}, window {window:,} in every layer"] = cfg.replace(attn_window=window,
                                                                                    global_every=None)
    except ConfigError:
        pass
    return out


def token_grid(context_length: int, points: int = 33) -> tuple[int, ...]:
    """Evenly spaced context lengths from 1 to context_length (inclusive), without repeats."""
    return tuple(sorted({max(1, round(context_length * k / (points - 1))) for k in range(points)}))
