"""LayerNorm and RMSNorm with optional gain (affine) and, for LayerNorm, optional bias."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import ModelConfig


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * gain + bias."""

    def __init__(self, dim: int, eps: float, affine: bool = True, bias: bool = True):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.empty(dim)) if affine else None
        self.bias = nn.Parameter(torch.empty(dim)) if affine and bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (self.dim,), self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * gain: no mean subtraction, no bias."""

    def __init__(self, dim: int, eps: float, affine: bool = True, bias: bool = False):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.empty(dim)) if affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (self.dim,), self.weight, self.eps)


NORMS: dict[str, type[nn.Module]] = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}


def make_norm(cfg: ModelConfig, dim: int | None = None) -> nn.Module:
    return NORMS[cfg.norm](dim or cfg.d_model, cfg.norm_eps, cfg.norm_affine, cfg.has_norm_bias)


def norm_params(cfg: ModelConfig, dim: int) -> int:
    """Parameters of one norm of width `dim` (the closed form matching the classes above)."""
    if not cfg.norm_affine:
        return 0
    return dim * (2 if cfg.has_norm_bias else 1)
