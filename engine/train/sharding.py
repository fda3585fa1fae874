"""Sharded training beside DDP: FSDP2 (fully_shard, ZeRO-3) and Megatron tensor parallelism (DTensor).

fsdp  every block is its own FSDP unit and the root holds the rest; each parameter, its gradient and its AdamW
      state keep only this rank's dim-0 chunk (torch.chunk), gathered for a block's forward and backward. Every
      rank trains on its slice of the global batch, as under DDP.
tp    in every block q, k, v, the output gate g, the FFN's gate and up are split by output features (ColwiseParallel) and o, down by input
      features (RowwiseParallel); norms and embeddings stay whole on every rank. Each rank holds n_heads/tp
      query heads and kv_heads/tp kv heads, and every rank sees the whole batch (tensor ranks share data).
The planner (engine/plan/parallel.py) prices exactly these layouts; tests/test_sharding.py holds the two equal.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from engine.config import ModelConfig
from engine.model import DecoderLM
from engine.train.ddp import DistInfo, wrap

MODES = ("ddp", "fsdp", "tp")


def parallelize(model: DecoderLM, info: DistInfo, mode: str) -> nn.Module:
    """The module to call in training: `model` itself for fsdp and tp (sharded in place), a DDP wrapper for ddp."""
    if info.world <= 1 or mode == "ddp":
        return wrap(model, info)
    if mode == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model
    if mode == "tp":
        if (problem := tp_problem(model.cfg)) is not None:
            raise ValueError(f"parallel: tp splits attention heads and FFN columns only; {problem} (use ddp or fsdp)")
        return tensor_parallel(model, info.world, "cuda" if next(model.parameters()).is_cuda else "cpu")
    raise ValueError(f"parallel: {mode!r} is not one of {', '.join(MODES)}")


def tp_problem(cfg: ModelConfig) -> str | None:
    """Why tensor_parallel's plan cannot split this model's blocks; None when it can. Each part below needs every
    head of a layer in one place: a norm over all heads' q/k, one sink logit per head kept whole, MLA's shared
    latent projections (none of them a column or row split of one Linear)."""
    if cfg.hybrid:
        return "this model has recurrent, mixer-only or FFN-only layers"
    if cfg.mla:
        return "MLA's latent projections (kv_lora_rank) are shared by every head"
    if cfg.attn_sinks:
        return "attn_sinks keeps one logit per head on every rank"
    if cfg.qk_norm and cfg.qk_norm_scope == "all_heads":
        return "qk_norm_scope all_heads normalizes over every head at once"
    return None


def tensor_parallel(model: DecoderLM, tp: int, device_type: str) -> DecoderLM:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    mesh = init_device_mesh(device_type, (tp,))
    col, row = ColwiseParallel(), RowwiseParallel()
    plan = {"attn.q_proj": col, "attn.k_proj": col, "attn.v_proj": col, "attn.o_proj": row, "ffn.up": col,
            "ffn.down": row}
    for block in model.blocks:
        parallelize_module(block, mesh, {**plan, **({"ffn.gate": col} if hasattr(block.ffn, "gate") else {}),
                                         # the output gate: one per output dimension or per head, split as q is
                                         **({"attn.g_proj": col} if block.attn.g_proj is not None else {})})
        block.attn.n_heads //= tp            # the heads this rank computes
        block.attn.kv_heads //= tp
    return model


def data_slice(info: DistInfo, mode: str) -> tuple[int, int]:
    """(rank, world) for the batch split: tensor-parallel ranks all take the whole batch."""
    return (0, 1) if mode == "tp" else (info.rank, info.world)


def full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor behind a DTensor (a collective: every rank must call it), else `t`."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


@torch.no_grad()
def clip_grad_norm(params: list[nn.Parameter], max_norm: float) -> torch.Tensor:
    """torch.nn.utils.clip_grad_norm_'s arithmetic (coefficient max_norm / (norm + 1e-6), at most 1) over
    gradients that may be a mix of DTensor shards and whole tensors; returns the global norm."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.sqrt(sum(full(g).float().pow(2).sum() for g in grads))
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0) if math.isfinite(max_norm) else 1.0
    for g in grads:
        g.mul_(coef)
    return norm


def rank_bytes(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, int]:
    """This rank's own parameter, gradient and optimizer-state bytes (local shards, each storage once)."""
    def local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if hasattr(t, "to_local") else t
    params = list(model.parameters())
    state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    size = lambda ts: sum(local(t).numel() * local(t).element_size() for t in ts)   # noqa: E731
    return {"weights": size(params), "grads": size([p.grad for p in params if p.grad is not None]),
            "optimizer": size(state)}
