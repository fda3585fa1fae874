"""'A fixed state instead of a growing cache': what one sequence costs to keep, and what one decoded token costs to
compute, as the context grows, for the same model with softmax attention in every layer, with Gated DeltaNet
(linear attention with a delta-rule state) in every layer, with Mamba-2 (a selective state space) in every layer,
and as a hybrid with a few attention layers.

Every number is an engine closed form: bytes = kv_cache_bytes (attention layers, growing with T) + state_bytes (a
recurrent layer's conv window and state, fixed; vLLM's convention, as this engine's decode cache holds it);
FLOPs per decoded token = decode_flops (2 x the matrix weights, plus 4 x heads x head_dim x T per attention layer,
plus a context-independent update per recurrent layer). Both are held against a real decode step's cache
tensors and against those formulas in tests/test_lecture_state.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.budget.flops import decode_flops
from engine.budget.memory import kv_cache_bytes, state_bytes
from engine.config import ModelConfig
from engine.layers.layer_map import with_attention_layers
from engine.layers.mixers import MIXERS
from engine.validation import int_problem, require

MARKS = (4_096, 131_072, 1_048_576)    # 4K, 128K, 1M tokens


@dataclass(frozen=True)
class StateKind:
    kind: str                          # "softmax attention, every layer", ...
    config: ModelConfig
    attention_layers: int
    kv_per_token: int                  # bytes the attention layers add per token (full layers; batch 1)
    state: int                         # bytes of the recurrent layers' state per sequence, whatever T
    bytes: tuple[int, ...]             # per sequence at each context of the grid: KV cache + state
    flops: tuple[int, ...]             # forward FLOPs of one decoded token after each context of the grid
    at_marks: tuple[int, ...]          # bytes per sequence at 4K, 128K, 1M
    flops_at_marks: tuple[int, ...]


@dataclass(frozen=True)
class FixedState:
    name: str
    n_layers: int
    dtype: str
    tokens: tuple[int, ...]
    marks: tuple[int, ...]
    kinds: tuple[StateKind, ...]


RECURRENT = ("gdn", "mamba2")   # linear attention with a delta rule, a selective state space


def state_layouts(cfg: ModelConfig) -> dict[str, ModelConfig]:
    """Softmax attention in every mixer layer, each RECURRENT kind in every one, and a hybrid: cfg's own layout when
    it mixes attention with a recurrent kind (Qwen3-Next, Jamba, Nemotron-H), else one attention layer in four with
    Gated DeltaNet elsewhere (Qwen3-Next's 3:1)."""
    n = sum(bool(s.mixers) for s in cfg.layer_specs)
    own = sum(s.attention for s in cfg.layer_specs)
    mixed = 0 < own < n and any(MIXERS[k].recurrent for s in cfg.layer_specs for k in s.mixers)
    hybrid = own if mixed else max(1, n // 4)
    return {"softmax attention, every layer": with_attention_layers(cfg, n),
            **{f"{MIXERS[r].label}, every layer": with_attention_layers(cfg, 0, r) for r in RECURRENT},
            f"hybrid: {hybrid} attention of {n}": cfg if mixed else with_attention_layers(cfg, hybrid)}


def _kind(label: str, c: ModelConfig, tokens: tuple[int, ...], marks: tuple[int, ...], dtype: str) -> StateKind:
    parts = state_bytes(c, 1, dtype)
    state = parts["conv"] + parts["recurrent"]
    per_seq = lambda t: kv_cache_bytes(c, 1, t, dtype) + state    # noqa: E731
    return StateKind(kind=label, config=c, attention_layers=sum(s.attention for s in c.layer_specs),
                     kv_per_token=kv_cache_bytes(c, 1, 1, dtype), state=state,
                     bytes=tuple(per_seq(t) for t in tokens), flops=tuple(decode_flops(c, 1, t) for t in tokens),
                     at_marks=tuple(per_seq(t) for t in marks),
                     flops_at_marks=tuple(decode_flops(c, 1, t) for t in marks))


def fixed_state(cfg: ModelConfig, tokens: Sequence[int], dtype: str = "bf16",
                marks: Sequence[int] = MARKS) -> FixedState:
    """Bytes per sequence and FLOPs per decoded token along `tokens` (and at `marks`) for each of state_layouts."""
    require(int_problem("tokens", min(tokens, default=1)))
    tokens, marks = tuple(tokens), tuple(marks)
    kinds = tuple(_kind(label, c, tokens, marks, dtype) for label, c in state_layouts(cfg).items())
    return FixedState(name=cfg.name, n_layers=cfg.n_layers, dtype=dtype, tokens=tokens, marks=marks, kinds=kinds)
