"""Feed-forward networks: dense act(x W_up) W_down, or gated (act(x W_gate) * x W_up) W_down.

The family's closed forms sit below the modules: parameters, matrix weights (FLOPs = 2 per weight per token)
and the bytes autograd saves. A new FFN choice is one entry in ACTIVATIONS / GATE_ACTIVATION plus the
config's choice list."""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import ModelConfig

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": functools.partial(F.gelu, approximate="tanh"),
    "silu": F.silu,
}
GATE_ACTIVATION = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh", "reglu": "relu"}


class DenseFFN(nn.Module):
    def __init__(self, d_model: int, d_ff: int, act: str, bias: bool):
        super().__init__()
        self.act = ACTIVATIONS[act]
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


class GatedFFN(nn.Module):
    """Three matrices; the activated gate multiplies the plain up-projection elementwise."""

    def __init__(self, d_model: int, d_ff: int, act: str, bias: bool):
        super().__init__()
        self.act = ACTIVATIONS[act]
        self.gate = nn.Linear(d_model, d_ff, bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.gate(x)) * self.up(x))


def make_ffn(cfg: ModelConfig) -> nn.Module:
    if cfg.gated:
        return GatedFFN(cfg.d_model, cfg.ffn_width, GATE_ACTIVATION[cfg.ffn], cfg.bias)
    return DenseFFN(cfg.d_model, cfg.ffn_width, cfg.ffn, cfg.bias)


def ffn_params(cfg: ModelConfig) -> int:
    d, f, mats = cfg.d_model, cfg.ffn_width, 3 if cfg.gated else 2
    biases = ((mats - 1) * f + d) if cfg.bias else 0
    return mats * d * f + biases


def ffn_matmul_params(cfg: ModelConfig) -> int:
    """Weights in the FFN's matrix products (2 FLOPs each per token): (3 gated or 2 dense) * d * f."""
    return (3 if cfg.gated else 2) * cfg.d_model * cfg.ffn_width


def ffn_saved_bytes(cfg: ModelConfig, tokens: int, e: int) -> int:
    """Bytes autograd saves inside the FFN, its input excluded: dense GELU/SiLU keep the activation input and
    output, ReLU only its output (which the down projection saves anyway); gated keeps the act input (not
    ReLU), act output, up output and their product."""
    relu = cfg.ffn in ("relu", "reglu")
    width = (3 if relu else 4) if cfg.gated else (1 if relu else 2)
    return width * tokens * cfg.ffn_width * e
