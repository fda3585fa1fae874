"""Small choices the Budgets and Compare pages share: which dtype goes with a precision policy, which attention
variants to overlay on the KV-cache chart, and the context-length grid. Pure functions, tested directly."""
from __future__ import annotations

from engine.config import ConfigError, ModelConfig
from engine.measure.latency import attention_variants

# The dtype activations and the KV cache are held in under each training precision policy.
POLICY_DTYPE = {"fp32": "fp32", "bf16": "bf16", "mixed-bf16": "bf16", "mixed-fp16": "fp16"}


def kv_variants(cfg: ModelConfig) -> dict[str, ModelConfig]:
    """The current config, its MHA/GQA/MQA siblings (engine.measure.latency.attention_variants) and a sliding
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


MEASURE_MAX_TOKENS = 4096  # batch x seq of a real model built on the Budgets page: seconds, not minutes, on a CPU
MEASURE_MAX_LAYERS = 256   # FlopCounterMode on meta costs ~20 ms a layer here: 1,000 layers stalled the page 30 s
COMPARE_TRAIN_SEQ = 2048   # the training-step memory bar on Compare


def measure_sizes(batch: int, seq: int, device: str) -> tuple[int, int, str | None]:
    """(batch, seq) a real-model measurement runs at, and what was capped and why (None: the page's own).
    On CPU at most MEASURE_MAX_TOKENS tokens per step: the batch shrinks first, then the sequence; saved bytes
    per token do not depend on the batch, so a smaller batch still tests the same closed form. CUDA: as asked
    (the memory guard refuses what does not fit)."""
    if device != "cpu" or batch * seq <= MEASURE_MAX_TOKENS:
        return batch, seq, None
    b = max(1, MEASURE_MAX_TOKENS // seq)
    s = min(seq, MEASURE_MAX_TOKENS // b)
    return b, s, (f"Real-model measurements on a CPU are capped at {MEASURE_MAX_TOKENS:,} tokens per step so they "
                  f"take seconds: building and running batch {b:,} x sequence {s:,} instead of the page's "
                  f"{batch:,} x {seq:,}. FLOPs are still counted at {batch:,} x {seq:,} (on the meta device).")


def compare_train_seq(cfg: ModelConfig) -> int:
    return min(cfg.context_length, COMPARE_TRAIN_SEQ)
