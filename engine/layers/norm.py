"""LayerNorm and RMSNorm with optional gain (affine) and, for LayerNorm, optional bias.

Below the modules: the family's closed forms (parameters, bytes saved for backward). A new norm is one class
here and its NORMS entry (plus what it saves in norm_saved_bytes)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.validation import Knobs, declare

if TYPE_CHECKING:   # engine.config assembles ModelConfig from this module's knobs
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


# ---- declared fields (engine/config.py assembles every family's into ModelConfig) ----------------------------
@dataclass(frozen=True)
class NormKnobs(Knobs):
    """Normalization: statistics, gains and biases, and where the norms sit."""
    norm: str = declare("layernorm", "normalization", "LayerNorm subtracts the mean and divides by the standard "
                         "deviation; RMSNorm only divides by the root mean square.", choices=tuple(NORMS))
    norm_eps: float = declare(1e-5, "normalization", "Small number added inside the square root for stability.",
                               lo=0, lo_open=True)
    norm_bias: bool | None = declare(None, "normalization", "LayerNorm's learned shift (beta); RMSNorm has none.",
                                      null="follow the norm: on for layernorm, off for rmsnorm")
    norm_affine: bool = declare(True, "normalization", "Learned per-channel gain after normalizing; off gives a "
                                 "parameter-free norm.")
    embed_norm: bool = declare(False, "normalization", "Normalize right after the embeddings (microgpt, BLOOM).")
    norm_placement: str = declare("pre", "normalization", "pre: x + F(N(x)); post: N(x + F(x)); sandwich: "
                                   "x + N2(F(N1(x))); post_branch: x + N(F(x)), the branch output normalized "
                                   "(OLMo-2).", choices=("pre", "post", "sandwich", "post_branch"))
    final_norm: bool = declare(True, "normalization", "A norm on the last hidden state, before the output head.")

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        if ok("norm", "norm_bias") and not NORMS[c.norm].has_bias and c.norm_bias:
            return [f"norm_bias: {c.norm} has no bias; set norm_bias: false"]
        return []


def has_bias(cfg: ModelConfig) -> bool:
    """norm_bias resolved, for the modules and the closed forms alike: explicit, else what the norm has
    (LayerNorm a shift, RMSNorm none)."""
    return NORMS[cfg.norm].has_bias if cfg.norm_bias is None else cfg.norm_bias


def make_norm(cfg: ModelConfig, dim: int | None = None, affine: bool | None = None,
              eps: float | None = None) -> nn.Module:
    """The config's norm of width `dim` (d_model); `affine` False drops the gain whatever norm_affine says; `eps`
    replaces norm_eps (MLA's latent norms)."""
    affine = cfg.norm_affine if affine is None else affine
    return NORMS[cfg.norm](dim or cfg.d_model, cfg.norm_eps if eps is None else eps, affine, has_bias(cfg))


def norm_params(cfg: ModelConfig, dim: int) -> int:
    """Parameters of one norm of width `dim` with the config's gain (the closed form matching the classes above;
    a gain-free norm, as Llama 4's rope_heads qk-norm, counts 0 at its caller)."""
    if not cfg.norm_affine:
        return 0
    return dim * (2 if has_bias(cfg) else 1)


STAT = 4   # bytes of an fp32 statistic (rstd, mean on CUDA, logsumexp)


def norm_saved_bytes(cfg: ModelConfig, rows: int, width: int, e: int, readers: int = 1,
                     affine: bool | None = None) -> int:
    """Bytes autograd saves for `readers` norms reading one tensor that nothing else saves, input included.
    LayerNorm saves its input plus mean and rstd (one per row, input dtype on CPU); RMSNorm saves its input,
    an fp32 rstd and, with a gain, the fp32 normalized x the gain multiply saves. RMSNorm in bf16/fp16
    computes in fp32 and saves its own fp32 copy of the input (one per norm) instead of the input."""
    if cfg.norm == "layernorm":
        stats = 2 * rows * e
    else:
        gain = cfg.norm_affine if affine is None else affine
        stats = rows * STAT + (rows * width * STAT if gain else 0)
    own_copy = cfg.norm == "rmsnorm" and e != STAT
    inp = readers * rows * width * STAT if own_copy else rows * width * e
    return inp + readers * stats
