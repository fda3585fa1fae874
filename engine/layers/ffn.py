"""Feed-forward networks: dense act(x W_up) W_down, or gated (act(x W_gate) * x W_up) W_down.

The family's closed forms sit below the modules: parameters, matrix weights (FLOPs = 2 per weight per token)
and the bytes autograd saves. A new FFN choice is one entry in ACTIVATIONS (dense) or GATE_ACTIVATION (gated):
the config's `ffn` choices, the lecture's curves and formulas and the diagram all read these two tables."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.init import init_linear
from engine.validation import Knobs, declare

if TYPE_CHECKING:   # engine.config assembles ModelConfig from this module's knobs
    from engine.config import ModelConfig


@dataclass(frozen=True)
class Activation:
    fn: Callable[[torch.Tensor], torch.Tensor]
    label: str              # as the lecture writes it
    formula: str
    saves_output: bool      # autograd keeps only its output (ReLU), the tensor the down projection saves anyway

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation(F.relu, "ReLU", "max(0, x)", True),
    "gelu": Activation(F.gelu, "GELU", "x·Φ(x)  (exact, Φ = normal CDF)", False),
    "gelu_tanh": Activation(functools.partial(F.gelu, approximate="tanh"), "GELU_tanh",
                            "x·½(1 + tanh(√(2/π)(x + 0.044715x³)))", False),
    "silu": Activation(F.silu, "SiLU", "x·σ(x)", False),
    # Nemotron-H's MLP and experts (transformers' ACT2FN["relu2"]); keeps relu's output, then squares it
    "relu2": Activation(lambda x: torch.square(F.relu(x)), "ReLU²", "max(0, x)²", False),
}
# swiglu_clamped (gpt-oss) gates with a SiLU of slope alpha, after clamping (ClampedSwiGLU below)
GATE_ACTIVATION = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh", "reglu": "relu",
                   "swiglu_clamped": "silu"}
DENSE_FFNS, GATED_FFNS = tuple(ACTIVATIONS), tuple(GATE_ACTIVATION)
CLAMPED = "swiglu_clamped"
Unit = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]   # (gate, up) -> the down projection's input


@dataclass(frozen=True)
class ClampedSwiGLU:
    """gpt-oss's gated unit, as transformers' GptOssExperts computes it: the gate clipped from above, the up
    projection on both sides, a sigmoid of slope alpha, and (u + 1) so that u = 0 still passes the gate."""
    limit: float
    alpha: float

    def __call__(self, g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        g = g.clamp(max=self.limit)
        u = u.clamp(-self.limit, self.limit)
        return g * torch.sigmoid(g * self.alpha) * (u + 1)


# ---- declared fields (engine/config.py assembles every family's into ModelConfig) ----------------------------
@dataclass(frozen=True)
class FFNKnobs(Knobs):
    """The feed-forward network: type and width."""
    ffn: str = declare("gelu_tanh", "ffn", "Feed-forward type: one activation between two matrices (dense) or "
                        "an activation gating a second projection (gated, three matrices).",
                        choices=DENSE_FFNS + GATED_FFNS)
    d_ff: int | None = declare(None, "ffn", "Hidden width of the feed-forward network.", lo=1,
                                null="4*d_model dense, 8/3*d_model gated (rounded up to ffn_multiple_of)")
    swiglu_limit: float = declare(7.0, "ffn", "swiglu_clamped: the gate is clipped from above at this value and the "
                                   "up projection to [-limit, limit] (gpt-oss: 7).", lo=0, lo_open=True)
    swiglu_alpha: float = declare(1.702, "ffn", "swiglu_clamped: slope of the gate's sigmoid, g*sigmoid(alpha*g) "
                                   "(gpt-oss: 1.702).", lo=0, lo_open=True)
    ffn_multiple_of: int = declare(256, "ffn", "The automatic gated width is rounded up to a multiple of this.",
                                    lo=1)
    ffn_gate_scale: float = declare(1.0, "ffn", "Gated FFNs: the gate is scaled before its activation, act(s*g)*u "
                                    "(Falcon-H1 mlp_multipliers[0]).", lo=0, lo_open=True)
    ffn_out_scale: float = declare(1.0, "ffn", "The FFN's output (an MoE's: routed and shared experts together) is "
                                   "scaled by this before the residual add (Falcon-H1 mlp_multipliers[1], Granite "
                                   "residual_multiplier).", lo=0, lo_open=True)

    @property
    def gated(self) -> bool:
        return self.ffn in GATED_FFNS

    @property
    def ffn_width(self) -> int:
        """Resolved d_ff: explicit, else 4*d_model dense or 8/3*d_model gated rounded up to ffn_multiple_of."""
        if self.d_ff is not None:
            return self.d_ff
        if not self.gated:
            return 4 * self.d_model
        m = self.ffn_multiple_of
        return m * math.ceil(8 * self.d_model / 3 / m)


def gated_unit(ffn: str, limit: float, alpha: float, gate_scale: float) -> Unit:
    """(g, u) -> what a gated FFN passes to its down projection: act(g)·u, or the clamped SwiGLU; with a gate
    scale s, of s·g."""
    unit = ClampedSwiGLU(limit, alpha) if ffn == CLAMPED else _act_times(ACTIVATIONS[GATE_ACTIVATION[ffn]].fn)
    return unit if gate_scale == 1.0 else lambda g, u: unit(g * gate_scale, u)


def _act_times(act: Callable[[torch.Tensor], torch.Tensor]) -> Unit:
    return lambda g, u: act(g) * u


def ffn_formula(ffn: str) -> str:
    """What one FFN unit computes: the activation's formula (dense), or act(g)·u (gated)."""
    if ffn == CLAMPED:
        return "g'·σ(α·g')·(u' + 1),  g' = min(g, limit), u' = clamp(u, ±limit)"
    return ACTIVATIONS[ffn].formula if ffn in ACTIVATIONS else f"{ACTIVATIONS[GATE_ACTIVATION[ffn]].label}(g)·u"


class DenseFFN(nn.Module):
    ROLES = {"up": ("up", "matrix"), "down": ("down", "matrix")}   # roles of the parameters (engine/plan/tensors.py)

    def __init__(self, d_model: int, d_ff: int, act: str, bias: bool, out_scale: float = 1.0):
        super().__init__()
        self.act, self.out_scale = ACTIVATIONS[act].fn, out_scale
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)

    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        init_linear(self.up, std, generator)
        init_linear(self.down, out_std, generator)       # writes into the residual stream

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.down(self.act(self.up(x)))              # [B, T, d] -> [B, T, f] -> [B, T, d]
        return y * self.out_scale if self.out_scale != 1.0 else y


class GatedFFN(nn.Module):
    """Three matrices; the activated gate multiplies the plain up-projection elementwise (`unit`, gated_unit)."""
    ROLES = {"gate": ("gate", "matrix"), "up": ("up", "matrix"), "down": ("down", "matrix")}

    def __init__(self, d_model: int, d_ff: int, unit: Unit, bias: bool, out_scale: float = 1.0):
        super().__init__()
        self.unit, self.out_scale = unit, out_scale
        self.gate = nn.Linear(d_model, d_ff, bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)

    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        init_linear(self.gate, std, generator)
        init_linear(self.up, std, generator)
        init_linear(self.down, out_std, generator)       # writes into the residual stream

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.down(self.unit(self.gate(x), self.up(x)))   # gate, up: [B, T, f]; out: [B, T, d]
        return y * self.out_scale if self.out_scale != 1.0 else y


def config_unit(cfg: ModelConfig) -> Unit:
    """The gated unit of a gated config (its clamp limit and slope for swiglu_clamped)."""
    return gated_unit(cfg.ffn, cfg.swiglu_limit, cfg.swiglu_alpha, cfg.ffn_gate_scale)


def make_ffn(cfg: ModelConfig) -> nn.Module:
    if cfg.gated:
        return GatedFFN(cfg.d_model, cfg.ffn_width, config_unit(cfg), cfg.bias, cfg.ffn_out_scale)
    return DenseFFN(cfg.d_model, cfg.ffn_width, cfg.ffn, cfg.bias, cfg.ffn_out_scale)


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
    ReLU), act output, up output and their product. The clamped SwiGLU keeps seven f-wide tensors: g and u
    (for the clamps' masks), the clamped g, its sigmoid, the SiLU product, u' + 1 and the final product."""
    relu = ACTIVATIONS[GATE_ACTIVATION.get(cfg.ffn, cfg.ffn)].saves_output
    width = 7 if cfg.ffn == CLAMPED else (3 if relu else 4) if cfg.gated else (1 if relu else 2)
    return width * tokens * cfg.ffn_width * e
