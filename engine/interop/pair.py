"""One module pair of a state-dict mapping: an HF module, our module(s) and the codec between them (the codecs
are described in engine/interop/weights.py). Its own module so that weights.py and the MoE readers both use it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    hf: str                 # HF module path (without .weight / .bias)
    ours: tuple[str, ...]   # our module path(s): three for a fused q/k/v
    codec: str
    raw: bool = False       # a bare tensor name (stacked expert weights), not a module with .weight / .bias


def norm_pairs(h: str, o: str) -> list[Pair]:
    """The two pre-norms of a Llama-like layer `h` (HF prefix) / `o` (ours)."""
    return [Pair(h + "input_layernorm", (o + "norm1",), "copy"),
            Pair(h + "post_attention_layernorm", (o + "norm2",), "copy")]


def dense_mlp_pairs(h: str, o: str, mlp: str = "mlp.") -> list[Pair]:
    """A gated MLP's gate, up and down projections."""
    return [Pair(f"{h}{mlp}{x}_proj", (f"{o}ffn.{x}",), "copy") for x in ("gate", "up", "down")]


def stacked_expert_pairs(h: str, o: str) -> list[Pair]:
    """Experts stored stacked: gate_up_proj [E, 2f, d] (gate rows first) and down_proj [E, d, f]."""
    e = o + "ffn.experts."
    return [Pair(h + "mlp.experts.gate_up_proj", (e + "gate", e + "up"), "halves", raw=True),
            Pair(h + "mlp.experts.down_proj", (e + "down",), "copy", raw=True)]
