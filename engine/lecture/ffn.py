"""Feed-forward examples: what the activations compute, and matching a gated FFN's parameters to a dense one."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.activation_grid import activation_curves as sampled_curves
from engine.config import DENSE_FFNS, ModelConfig
from engine.layers.ffn import ACTIVATIONS, ffn_params
from engine.validation import int_problem, require


def activation_values(z: float) -> dict[str, float]:
    """Every FFN activation of the engine at one input, plus sigmoid(z): the factor SiLU multiplies z by.

    GELU(-1) is about -0.158655 (a small negative lobe where ReLU is 0); SiLU(2) is about 1.762, above 1,
    so a SiLU gate is not a probability in [0, 1]. Deterministic: the same z always gives the same values."""
    x = torch.tensor([float(z)], dtype=torch.float64)
    values = {name: float(act.fn(x)) for name, act in ACTIVATIONS.items()}
    values["sigmoid"] = float(torch.sigmoid(x))
    return values


def dense_activation_table(lo: float = -4.0, hi: float = 4.0, n: int = 161) -> dict[str, list[float]]:
    """Sampled curves for a chart: key 'z' holds the inputs, one key per dense activation its outputs (the
    Activations page's engine.activation_grid.activation_curves, reshaped for the lecture chart)."""
    curves = sampled_curves(DENSE_FFNS, lo, hi, n)
    return {"z": curves[DENSE_FFNS[0]].x, **{name: c.y for name, c in curves.items()}}


@dataclass(frozen=True)
class GatingMatch:
    d_model: int
    dense_width: int
    multiple_of: int
    dense_params: int             # 2*D*F: two bias-free matrices
    exact_gated_width: float      # 2F/3 makes 3*D*F_g equal 2*D*F exactly
    gated_width: int              # 2F/3 rounded up to a multiple of `multiple_of`
    gated_params: int             # 3*D*F_g at the rounded width
    gated_gap: float              # gated_params / dense_params - 1 (0 only when the rounding is exact)
    same_width_gated_params: int  # 3*D*F: keeping the dense width for the gated FFN
    same_width_extra: float       # same_width_gated_params / dense_params - 1 (always 0.5)
    dense_bias_params: int        # F + D: what the dense biases would add


def _ffn_matrix_params(d_model: int, width: int, ffn: str, bias: bool = False) -> int:
    cfg = ModelConfig(name="ffn-demo", d_model=d_model, n_heads=1, d_ff=width, ffn=ffn, bias=bias)
    return ffn_params(cfg)


def gating_match(d_model: int = 768, dense_width: int | None = None, multiple_of: int = 256) -> GatingMatch:
    """Parameter-matched gating: 3*D*F_g = 2*D*F gives F_g = 2F/3; real models round F_g to a hardware-friendly
    multiple, so the match is then only approximate. At D=768, F=3072: both 4,718,592; gated at 3072: 7,077,888."""
    F = 4 * d_model if dense_width is None else dense_width
    require(int_problem("d_model", d_model), int_problem("dense_width", F), int_problem("multiple_of", multiple_of))
    dense = _ffn_matrix_params(d_model, F, "gelu")
    gated_width = multiple_of * math.ceil(2 * F / (3 * multiple_of))
    gated = _ffn_matrix_params(d_model, gated_width, "swiglu")
    same = _ffn_matrix_params(d_model, F, "swiglu")
    return GatingMatch(d_model=d_model, dense_width=F, multiple_of=multiple_of, dense_params=dense,
                       exact_gated_width=2 * F / 3, gated_width=gated_width, gated_params=gated,
                       gated_gap=gated / dense - 1, same_width_gated_params=same, same_width_extra=same / dense - 1,
                       dense_bias_params=_ffn_matrix_params(d_model, F, "gelu", bias=True) - dense)
