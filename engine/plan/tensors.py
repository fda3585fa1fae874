"""The parameter tensors of a config, with their shapes and roles, read off the model built on the meta device.

The planner prices memory tensor by tensor (quantization groups, FSDP chunks and Megatron splits all depend on
the shape, not only on the count), so it needs every tensor's shape; building `DecoderLM` on the meta device
allocates nothing and is exact by construction (a tied head is the embedding's one Parameter, listed once).
Roles: embedding, positions, head, norm, router, the block matrices q/k/v/o (MLA: q_a/q_b/kv_a/kv_b) and
gate/up/down (MoE shared experts too) with their biases ("q_bias", ...), and MoE routed experts
expert_gate/up/down [E, out, in].
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from engine.config import ModelConfig

# our module names -> the role of their weight matrix
MATRICES = {"attn.q_proj": "q", "attn.k_proj": "k", "attn.v_proj": "v", "attn.o_proj": "o",
            "ffn.gate": "gate", "ffn.up": "up", "ffn.down": "down",
            "ffn.shared.gate": "gate", "ffn.shared.up": "up", "ffn.shared.down": "down",    # MoE shared experts
            "attn.q_a": "q_a", "attn.q_b": "q_b", "attn.kv_a": "kv_a", "attn.kv_b": "kv_b"}  # MLA projections
EXPERTS = ("expert_gate", "expert_up", "expert_down")   # MoE routed experts, stacked [E, out, in]
COLUMN_SPLIT = ("q", "k", "v", "gate", "up", "q_b", "kv_b")   # Megatron: output features split across tensor-
                                                               # parallel ranks (MLA's down-projections replicated)
ROW_SPLIT = ("o", "down")                          # input features split; their bias is replicated


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    role: str               # "q".."down" (block matrix weight), "q_bias".."down_bias", "norm", "embedding", ...
    layer: int | None       # block index, None outside the blocks

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


def _role(name: str) -> tuple[str, int | None]:
    parts = name.split(".")
    if parts[0] != "blocks":
        return {"tok_emb": "embedding", "pos_emb": "positions", "head": "head"}.get(parts[0], "norm"), None
    layer, module, leaf = int(parts[1]), ".".join(parts[2:-1]), parts[-1]
    if module in MATRICES:
        return MATRICES[module] + ("" if leaf == "weight" else "_bias"), layer
    if module == "ffn.experts":
        return "expert_" + leaf, layer
    if module in ("ffn.router", "ffn.shared_gate"):
        return "router", layer
    return "norm", layer


@lru_cache(maxsize=32)
def param_tensors(cfg: ModelConfig) -> tuple[Tensor, ...]:
    """Every unique parameter of DecoderLM(cfg) in registration order."""
    from engine.model import DecoderLM
    with torch.device("meta"):
        model = DecoderLM(cfg)
    return tuple(Tensor(n, tuple(p.shape), *_role(n)) for n, p in model.named_parameters())
