"""The Compare page without Streamlit: its pins (at most MAX_PINS configs, each once, under unique labels) and the
closed-form values its bar charts show."""
from __future__ import annotations

from typing import Mapping

from engine.budget.flops import headline_flops
from engine.budget.memory import kv_cache_bytes, memory_budget, state_bytes
from engine.budget.params import count_params
from engine.config import ModelConfig

MAX_PINS = 4


def add_pin(pins: list[tuple[str, ModelConfig]], label: str, config: ModelConfig) -> str:
    """Append (label, config) to `pins` in place, numbering a repeated label ("gpt2 (2)"); returns the note the
    page shows instead when the pins are full or the config is already pinned ('' when it was pinned)."""
    if len(pins) >= MAX_PINS:
        return f"At most {MAX_PINS} pins: unpin one first."
    if any(c == config for _, c in pins):
        return f"{label} is already pinned."
    labels = {lab for lab, _ in pins}
    n, unique = 2, label
    while unique in labels:
        unique, n = f"{label} ({n})", n + 1
    pins.append((unique, config))
    return ""


COMPARE_TRAIN_SEQ = 2048  # the training-step memory bar: long enough to matter, short enough for any config


def compare_train_seq(cfg: ModelConfig) -> int:
    return min(cfg.context_length, COMPARE_TRAIN_SEQ)


def compare_metrics(configs: Mapping[str, ModelConfig]) -> dict[str, dict[str, list[float]]]:
    """The three charts' values, one per pinned config, all closed forms: parameters (total, non-embedding);
    memory at batch 1 (bf16 weights, bf16 KV cache at the full context, the recurrent layers' state in bf16 under
    vLLM's convention when a pinned config has one, a mixed-bf16 AdamW training step at compare_train_seq);
    training FLOPs per token at the full context (the headline: causal, windowed query-key pairs) beside the 6N
    rule."""
    cs = list(configs.values())
    params = [count_params(c) for c in cs]
    flops = [headline_flops(c, 1, c.context_length) for c in cs]
    state = [sum(state_bytes(c, 1, "bf16").values()) for c in cs]
    memory = {"bf16 weights": [memory_budget(c, 1, c.context_length, "bf16", "bf16").weights_bytes for c in cs],
              "KV cache": [kv_cache_bytes(c, 1, c.context_length, "bf16") for c in cs],
              **({"recurrent state": state} if any(state) else {}),
              "training step": [memory_budget(c, 1, compare_train_seq(c)).train_total_bytes for c in cs]}
    return {
        "params": {"total": [p.total for p in params], "active per token": [p.active for p in params],
                   "non-embedding": [p.non_embedding for p in params]},
        "memory": memory,
        "flops": {"counted": [f.flops_per_token for f in flops], "6N rule": [f.six_n_per_token for f in flops]},
    }
