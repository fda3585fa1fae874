"""The parameter tensors of a config, with their shapes and roles, read off the model built on the meta device.

The planner prices memory tensor by tensor (quantization groups, FSDP chunks and Megatron splits all depend on
the shape, not only on the count), so it needs every tensor's shape; building `DecoderLM` on the meta device
allocates nothing and is exact by construction (a tied head is the embedding's one Parameter, listed once).

Each module declares the role of its own parameters beside them, in a class attribute
`ROLES = {attribute: (role, kind)}`: a direct nn.Parameter takes (role, kind); a child module's `weight` takes
(role, kind) and its other parameters (a Linear's or Conv1d's bias) (role + "_bias", "bias"), except a child of
kind "norm", all of whose parameters are (role, "norm"). A parameter no module declares is an error, never a
fallback. The kind says how the planner treats the tensor; the role says which one it is (the Megatron split,
llama.cpp's category, the LoRA target, the checkpoint part):
  embedding, positions, head     the token table, learned positions, an untied output head
  matrix     a block's projection weight [out, in]: attention q/k/v/o (MLA q_a/q_b/kv_a/kv_b), its output gate
             g, FFN gate/up/down (MoE shared experts too), the recurrent mixers' projections (ssm_in, ssm_out, ...)
             and the sparse-attention indexer's index_q, index_k, index_weights
  expert     MoE routed experts expert_gate/up/down, stacked [E, out, in]
  router     the MoE router and the shared-expert gate (scores, kept in high precision)
  norm       norm gains and shifts
  conv       a recurrent mixer's depthwise conv weight [C, 1, K]
  vector     per-channel or per-head learned values: sinks, A_log (ssm_a), D (ssm_d), dt_bias (ssm_dt_bias)
  bias       a projection's bias ("q_bias", ...; experts "expert_up_bias", ...)
  adapter    a LoRA adapter's A or B (engine/plan/finetune.py), never a parameter of the model itself
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import nn

from engine.config import ModelConfig

KINDS = ("embedding", "positions", "head", "matrix", "expert", "router", "norm", "conv", "vector", "bias", "adapter")
EXPERTS = ("expert_gate", "expert_up", "expert_down")   # MoE routed experts, stacked [E, out, in]
COLUMN_SPLIT = ("q", "k", "v", "g", "gate", "up", "q_b", "kv_b")   # Megatron: output features split across
                                                # tensor-parallel ranks (MLA's down-projections replicated; the
                                                # attention gate g with the query heads, as vLLM's Qwen3-Next
                                                # packs it into the query rows of QKVParallelLinear)
ROW_SPLIT = ("o", "down")                          # input features split; their bias is replicated


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    role: str               # "q".."down" (block matrix weight), "q_bias".."down_bias", "norm", "embedding", ...
    layer: int | None       # block index, None outside the blocks
    kind: str               # one of KINDS

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


def declared_roles(model: nn.Module) -> dict[str, tuple[str, str]]:
    """{parameter name: (role, kind)} from every module's ROLES."""
    out: dict[str, tuple[str, str]] = {}
    for prefix, module in model.named_modules():
        for attr, (role, kind) in getattr(module, "ROLES", {}).items():
            # every module sets each attribute it declares (None when the config leaves it out): a missing one is a
            # typo in ROLES, an AttributeError here rather than a parameter silently without its role
            child, name = getattr(module, attr), f"{prefix}.{attr}" if prefix else attr
            if isinstance(child, nn.Parameter):
                out[name] = (role, kind)
            elif isinstance(child, nn.Module):          # a buffer of the same name (a frozen bias) is no parameter
                for leaf, _ in child.named_parameters():
                    out[f"{name}.{leaf}"] = (role, kind) if leaf == "weight" or kind == "norm" else \
                        (role + "_bias", "bias")
    return out


def _layer(name: str) -> int | None:
    parts = name.split(".")
    return int(parts[1]) if parts[0] == "blocks" else None


@lru_cache(maxsize=32)
def param_tensors(cfg: ModelConfig) -> tuple[Tensor, ...]:
    """Every unique parameter of DecoderLM(cfg) in registration order."""
    from engine.model import DecoderLM
    with torch.device("meta"):
        model = DecoderLM(cfg)
    roles = declared_roles(model)
    out = []
    for n, p in model.named_parameters():
        if n not in roles:
            raise LookupError(f"{n}: no module declares its role (ROLES beside the parameter)")
        role, kind = roles[n]
        out.append(Tensor(n, tuple(p.shape), role, _layer(n), kind))
    return tuple(out)
