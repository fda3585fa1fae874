"""Block and normalization examples: the engine's own Block with toy branches, and RMSNorm next to LayerNorm."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from engine.config import ModelConfig
from engine.layers.block import Block
from engine.layers.norm import LayerNorm, RMSNorm
from engine.validation import number_problem, require


class _FirstCoordinate(nn.Module):
    """Toy attention branch A(z) = gain * [z_0, 0, ..., 0] (gain = 1): a stand-in, not attention. The gain is
    the only tensor that requires grad, so autograd tells whether the FFN's input depends on this branch."""

    def __init__(self) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones((), dtype=torch.float64))

    def forward(self, h: torch.Tensor, pos, rope, cache) -> torch.Tensor:
        out = torch.zeros_like(h)
        out[..., 0] = h[..., 0]
        return out * self.gain


class _Identity(nn.Module):
    """Toy FFN branch M(z) = z that remembers what it read."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        self.seen = h
        return h


@dataclass(frozen=True)
class LayoutResult:
    block: str                     # "serial" or "parallel"
    output: list[float]            # the block's output y
    ffn_input: list[float]         # what the FFN branch read (after its norm)
    ffn_sees_attention: bool       # does the FFN input depend on this block's attention branch? (autograd)


@dataclass(frozen=True)
class SerialParallel:
    x: list[float]
    eps: float
    normed_x: list[float]          # LN(x), affine-free
    attention_out: list[float]     # A(LN(x))
    serial: LayoutResult
    parallel: LayoutResult


def _run_block(x: torch.Tensor, eps: float, layout: str) -> LayoutResult:
    cfg = ModelConfig(name="toy-block", d_model=x.numel(), n_heads=1, norm="layernorm", norm_affine=False,
                      norm_bias=False, norm_eps=eps, block=layout, parallel_shared_norm=True)
    block = Block(cfg)
    block.attn, block.ffn = _FirstCoordinate(), _Identity()
    y = block(x.view(1, 1, -1), torch.arange(1), None)
    seen = block.ffn.seen  # only the attention gain requires grad, so autograd tracks exactly that dependency
    return LayoutResult(block=layout, output=y.detach().flatten().tolist(), ffn_input=seen.detach().flatten().tolist(),
                        ffn_sees_attention=seen.requires_grad)


def serial_vs_parallel(x: tuple[float, ...] = (1.0, 2.0, 3.0, 4.0), eps: float = 1e-6) -> SerialParallel:
    """Run the engine's pre-norm Block, serial and parallel (one shared norm), with toy branches
    A(z) = [z_0, 0, ...] and M(z) = z: the same functions give different outputs, because in the serial block
    the FFN reads this block's attention update and in the parallel block it does not."""
    if len(x) < 2:
        raise ValueError(f"x: needs at least 2 coordinates for a LayerNorm, got {len(x)}")
    require(number_problem("eps", eps, strict=True))
    t = torch.tensor(x, dtype=torch.float64)
    normed = LayerNorm(len(x), eps, affine=False)(t)
    return SerialParallel(x=list(map(float, x)), eps=eps, normed_x=normed.tolist(),
                          attention_out=_FirstCoordinate()(normed, None, None, None).detach().tolist(),
                          serial=_run_block(t, eps, "serial"), parallel=_run_block(t, eps, "parallel"))


@dataclass(frozen=True)
class NormComparison:
    x: list[float]
    eps: float
    rmsnorm: list[float]
    layernorm: list[float]
    rmsnorm_mean: float     # RMSNorm does not center: the mean survives
    layernorm_mean: float   # LayerNorm output has mean 0
    rms_of_input: float


def norm_comparison(x: tuple[float, ...] = (3.0, 4.0), eps: float = 0.0) -> NormComparison:
    """The engine's RMSNorm and LayerNorm without gains: (3, 4) -> (0.8485, 1.1314) vs (-1, 1).
    eps defaults to 0 to match the hand calculation; the model's norms use a small eps > 0."""
    if len(x) < 2:
        raise ValueError(f"x: needs at least 2 coordinates, got {len(x)}")
    require(number_problem("eps", eps))
    t = torch.tensor(x, dtype=torch.float64)
    rms = RMSNorm(len(x), eps, affine=False)(t)
    ln = LayerNorm(len(x), eps, affine=False)(t)
    return NormComparison(x=list(map(float, x)), eps=eps, rmsnorm=rms.tolist(), layernorm=ln.tolist(),
                          rmsnorm_mean=float(rms.mean()), layernorm_mean=float(ln.mean()),
                          rms_of_input=float(t.pow(2).mean().sqrt()))
