"""'You store every expert, you compute k': one MoE preset's memory from total parameters, FLOPs from active ones,
beside the dense model with the same active parameters (the same compute per token)."""
from __future__ import annotations

from dataclasses import dataclass

from engine.budget.flops import matmul_params
from engine.budget.params import count_params
from engine.presets import get_preset


@dataclass(frozen=True)
class StoreVsCompute:
    name: str
    experts: int
    per_token: int
    total: int                # parameters stored (every expert)
    active: int               # parameters one token uses
    weights_bf16: int         # bytes to hold the weights: total x 2
    active_bf16: int          # what a dense model of the active size would hold
    forward_flops_per_token: int   # 2 x the active matrix parameters (attention scores aside)
    dense_equivalent_flops: int    # a dense model computing all its parameters: 2 x its matrix parameters
    routed_share: float       # share of the stored parameters that sit in routed experts


def store_vs_compute(preset: str = "mixtral-8x7b") -> StoreVsCompute:
    cfg = get_preset(preset).config
    pc = count_params(cfg)
    dense = cfg.replace(n_experts=None, d_ff=cfg.expert_width * cfg.n_experts) if cfg.n_experts else cfg
    return StoreVsCompute(
        name=preset, experts=cfg.n_experts or 0, per_token=cfg.experts_per_token if cfg.n_experts else 0,
        total=pc.total, active=pc.active, weights_bf16=2 * pc.total, active_bf16=2 * pc.active,
        forward_flops_per_token=2 * matmul_params(cfg), dense_equivalent_flops=2 * matmul_params(dense),
        routed_share=pc.components["routed_experts"] / pc.total)
