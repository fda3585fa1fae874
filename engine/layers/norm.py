"""LayerNorm and RMSNorm with optional gain (affine) and, for LayerNorm, optional bias.

Below the modules: the family's closed forms (parameters, bytes saved for backward). A new norm is one class
here and its NORMS entry (plus what it saves in norm_saved_bytes)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:   # engine.config reads the norm choices from NORMS
    from engine.config import ModelConfig


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * gain + bias."""
    label, has_bias = "LayerNorm", True

    def __init__(self, dim: int, eps: float, affine: bool = True, bias: bool = True):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.empty(dim)) if affine else None
        self.bias = nn.Parameter(torch.empty(dim)) if affine and bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (self.dim,), self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * gain: no mean subtraction, no bias."""
    label, has_bias = "RMSNorm", False

    def __init__(self, dim: int, eps: float, affine: bool = True, bias: bool = False):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.empty(dim)) if affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (self.dim,), self.weight, self.eps)


# The config's `norm` choices, the diagram's labels and the bias rule all read this table.
NORMS: dict[str, type[LayerNorm] | type[RMSNorm]] = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}


def has_bias(cfg: ModelConfig) -> bool:
    """norm_bias resolved, for the modules and the closed forms alike: explicit, else what the norm has
    (LayerNorm a shift, RMSNorm none)."""
    return NORMS[cfg.norm].has_bias if cfg.norm_bias is None else cfg.norm_bias


def make_norm(cfg: ModelConfig, dim: int | None = None) -> nn.Module:
    return NORMS[cfg.norm](dim or cfg.d_model, cfg.norm_eps, cfg.norm_affine, has_bias(cfg))


def norm_params(cfg: ModelConfig, dim: int) -> int:
    """Parameters of one norm of width `dim` (the closed form matching the classes above)."""
    if not cfg.norm_affine:
        return 0
    return dim * (2 if has_bias(cfg) else 1)


STAT = 4   # bytes of an fp32 statistic (rstd, mean on CUDA, logsumexp)


def norm_saved_bytes(cfg: ModelConfig, rows: int, width: int, e: int, readers: int = 1) -> int:
    """Bytes autograd saves for `readers` norms reading one tensor that nothing else saves, input included.
    LayerNorm saves its input plus mean and rstd (one per row, input dtype on CPU); RMSNorm saves its input,
    an fp32 rstd and, with a gain, the fp32 normalized x the gain multiply saves. RMSNorm in bf16/fp16
    computes in fp32 and saves its own fp32 copy of the input (one per norm) instead of the input."""
    if cfg.norm == "layernorm":
        stats = 2 * rows * e
    else:
        stats = rows * STAT + (rows * width * STAT if cfg.norm_affine else 0)
    own_copy = cfg.norm == "rmsnorm" and e != STAT
    inp = readers * rows * width * STAT if own_copy else rows * width * e
    return inp + readers * stats
