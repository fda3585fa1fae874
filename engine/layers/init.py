"""GPT-2 style initial values, one helper per parameter kind; each module's init_weights uses these.

Matrices draw from N(0, std), projections into the residual stream (attention out, FFN down) from
N(0, out_std) with out_std = std / sqrt(2 * n_layers); biases start at zero, norm gains at one. Every draw
takes the model's one generator, in the order the modules are registered, so a seed fixes every value.
"""
from __future__ import annotations

import torch
from torch import nn


def init_linear(layer: nn.Linear | nn.Embedding, std: float, generator: torch.Generator) -> None:
    nn.init.normal_(layer.weight, 0.0, std, generator=generator)
    if getattr(layer, "bias", None) is not None:
        nn.init.zeros_(layer.bias)


def init_norm(norm: nn.Module | None) -> None:
    """Unit gain, zero bias (either may be absent); None (no norm at this place) is skipped."""
    if norm is None:
        return
    if norm.weight is not None:
        nn.init.ones_(norm.weight)
    if getattr(norm, "bias", None) is not None:
        nn.init.zeros_(norm.bias)
