"""Small choices of the Budgets page: which attention variants to overlay on the KV-cache chart, the
context-length grid and the words under the memory-vs-context chart. Pure functions, tested directly."""
from __future__ import annotations

from engine.budget.context_memory import ContextMemory, Crossing
from engine.budget.memory import attention_windows, kv_cache_bytes
from engine.config import ConfigError, ModelConfig
from engine.layers.kv_heads import attention_variants
from engine.units import fmt_bytes


def kv_variants(cfg: ModelConfig) -> dict[str, ModelConfig]:
    """The current config, its MHA/GQA/MQA siblings (engine.layers.kv_heads.attention_variants) and a sliding
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


MARKED = ("H100", "H200", "B200", "RTX 4090")   # the GPUs the memory-vs-context chart marks unless told otherwise


def _crossed(tokens: int | None) -> str:
    return "never (the whole context fits)" if tokens is None else (
        "already by the weights and state" if tokens == 0 else f"at {tokens:,} tokens")


def context_caption(cfg: ModelConfig, m: ContextMemory, dense: ContextMemory | None, marks: list[Crossing],
                    batch: int, dtype: str) -> str:
    """What the memory-vs-context chart stacks, from which closed forms, and where each device is crossed."""
    n_att = len(attention_windows(cfg))
    per_token = kv_cache_bytes(cfg, batch, 1, dtype)
    text = (f"Closed forms (engine/budget/context_memory.py), batch {batch:,}, {dtype}: weights "
            f"{fmt_bytes(m.weights)} and the recurrent + conv state {fmt_bytes(m.state)} stay flat "
            f"(vLLM's convention); the KV cache of the {n_att:,} attention layers of {cfg.n_layers:,} grows by "
            f"{fmt_bytes(per_token)} per token")
    if dense is not None:
        text += (f"; the dashed line is the same model with every mixer attention "
                 f"({fmt_bytes(dense.weights)} of weights, {fmt_bytes(dense.kv[0] // max(1, dense.tokens[0]))} "
                 f"per token)")
    crossed = "; ".join(f"{c.device} ({fmt_bytes(c.memory_bytes)}) {_crossed(c.tokens)}"
                        + (f", every mixer attention {_crossed(c.all_attention_tokens)}" if dense is not None else "")
                        for c in marks)
    return f"{text}." + (f" Crossed (✕ this model, ○ every mixer attention): {crossed}." if marks else "")
