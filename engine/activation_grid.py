"""FFN activations and gated products on a grid: values and derivatives, the derivatives from torch autograd
on the engine's own activation functions (engine/layers/ffn.py), so the plots show what the model computes.

Dense:  y = act(x)                   dy/dx
Gated:  y = act(g) * u               along the diagonal g = u = x (what one unit does when its gate and up
                                     projections agree): y = act(x) * x, dy/dx = act'(x) * x + act(x);
                                     and the full surface act(g) * u on a (g, u) grid. The clamped
                                     SwiGLU (gpt-oss) draws its own unit at gpt-oss's limit 7 and slope 1.702.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.layers.ffn import ACTIVATIONS, DENSE_FFNS, GATED_FFNS, FFNKnobs, Unit, ffn_formula, gated_unit
from engine.validation import choice_problem, int_problem, require


@dataclass(frozen=True)
class Curve:
    name: str
    x: list[float]
    y: list[float]
    dy: list[float]       # derivative dy/dx (autograd)
    formula: str


FORMULAS = {name: ffn_formula(name) for name in DENSE_FFNS + GATED_FFNS}


def _unit(name: str) -> Unit:
    """The gated unit at the config's declared defaults (clamp limit and slope: gpt-oss's; no gate scale)."""
    return gated_unit(name, FFNKnobs.swiglu_limit, FFNKnobs.swiglu_alpha, FFNKnobs.ffn_gate_scale)


def _grid(lo: float, hi: float, n: int) -> torch.Tensor:
    require(int_problem("n", n, lo=2))
    if not hi > lo:
        raise ValueError(f"range: hi={hi} must be greater than lo={lo}")
    return torch.linspace(lo, hi, n, dtype=torch.float64, requires_grad=True)


def activation_curve(name: str, lo: float = -4.0, hi: float = 4.0, n: int = 201) -> Curve:
    """One activation (dense name) or gated product along g = u = x (gated name), with its derivative."""
    require(choice_problem("activation", name, FORMULAS))
    x = _grid(lo, hi, n)
    if name in GATED_FFNS:
        y = _unit(name)(x, x)
    else:
        y = ACTIVATIONS[name].fn(x)
    (dy,) = torch.autograd.grad(y.sum(), x)   # elementwise functions: the gradient of the sum is dy/dx
    return Curve(name, x.detach().tolist(), y.detach().tolist(), dy.tolist(), FORMULAS[name])


def activation_curves(names: tuple[str, ...] = DENSE_FFNS + GATED_FFNS, lo: float = -4.0, hi: float = 4.0,
                      n: int = 201) -> dict[str, Curve]:
    return {name: activation_curve(name, lo, hi, n) for name in names}


@dataclass(frozen=True)
class Surface:
    name: str
    g: list[float]              # gate inputs (columns)
    u: list[float]              # up-projection inputs (rows)
    z: list[list[float]]        # z[i][j] = act(g[j]) * u[i] (the clamped SwiGLU: its own unit)


def gated_surface(name: str, lo: float = -3.0, hi: float = 3.0, n: int = 61) -> Surface:
    """act(g) * u on an n x n grid: the gate decides how much of the linear `up` value passes."""
    require(choice_problem("gated ffn", name, GATED_FFNS))
    axis = _grid(lo, hi, n).detach()
    z = _unit(name)(axis[None, :], axis[:, None])
    return Surface(name, axis.tolist(), axis.tolist(), z.tolist())
