"""Mamba-2 mixer (Dao & Gu 2024), as transformers' Mamba2Mixer and the hybrid families' mixers compute it
(longer than 300 lines: the layer's fields, module, closed forms and registry entry stay in one home).

    z, xBC, dt = in_proj(x)                     widths d_in, d_in + 2*G*N, H        (d_in = H*P)
    x, B, C    = silu(conv1d(xBC))              depthwise, kernel K, causal
    dt         = clamp(softplus(dt + dt_bias), dt_limit);   A = -exp(A_log)          one of each per head
    h_t        = exp(dt_t*A) h_{t-1} + dt_t x_t B_t^T       per head: P x N, B and C shared by the H/G heads of a group
    y_t        = h_t C_t + D x_t;   out = out_proj(gate(y, z))

The scan runs chunked (training, prefill) or one token at a time (decode), engine/layers/ssd.py; the decode cache
(attention.LayerKV) keeps the conv's last K-1 inputs and h. Below the module: its closed forms (params, FLOPs,
saved bytes, state elements), then the declared fields (`Mamba2Knobs`) and the registry entry (`Mamba2Mixer`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers import ssd
from engine.layers.attention import LayerKV
from engine.layers.init import init_linear
from engine.layers.kinds import Mixer
from engine.layers.short_conv import conv_params
from engine.layers.ssm import compute_dtype, make_conv, recompute, silu_conv
from engine.runtime import TORCH_DTYPES
from engine.validation import Knobs, declare

if TYPE_CHECKING:
    from engine.config import ModelConfig

# y is normalised per group of d_in/G channels; the gate z enters before the norm (Mamba-2's own RMSNormGated,
# Bamba, Nemotron-H, Granite-4.0-H), after it (Falcon-H1 mamba_norm_before_gate), or alone (mamba_rms_norm off)
GATES = {"norm_gated": "RMSNorm(y * silu(z)) per group", "gate_normed": "RMSNorm(y) * silu(z) per group",
         "gate": "y * silu(z), no norm"}


@dataclass(frozen=True)
class Mamba2Dims:
    d_model: int
    heads: int                     # H
    head_dim: int                  # P
    state: int                     # N
    groups: int = 1                # G: B and C are shared by the H/G heads of a group
    conv_kernel: int = 4           # K
    chunk: int = 256               # Q: tokens per chunk of the chunked scan
    conv_bias: bool = True
    proj_bias: bool = False        # in_proj and out_proj
    gate: str = "norm_gated"
    norm_eps: float = 1e-5
    dt_min: float = 0.0            # transformers' time_step_limit: dt is clamped to [dt_min, dt_max]
    dt_max: float = math.inf
    in_scale: float = 1.0          # Falcon-H1 ssm_in_multiplier: x is scaled before in_proj
    proj_scales: tuple[float, float, float, float, float] | None = None   # Falcon-H1 ssm_multipliers (z, x, B, C, dt)
    out_scale: float = 1.0         # Falcon-H1 ssm_out_multiplier, Granite residual_multiplier: the output's scale

    @property
    def d_inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        return self.d_inner + 2 * self.groups * self.state

    @property
    def proj_width(self) -> int:
        return self.d_inner + self.conv_channels + self.heads


class GatedRMSNorm(nn.Module):
    """The gain of the grouped RMSNorm (gated_rms_norm computes it; the module holds its one parameter)."""

    def __init__(self, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(width))


def gated_rms_norm(y: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, groups: int, eps: float,
                   gate_first: bool) -> torch.Tensor:
    """RMSNorm over each of `groups` equal slices of the channels (in y's dtype, fp32), times the gain, with the silu gate
    applied before it (Mamba-2) or after it (Falcon-H1 mamba_norm_before_gate)."""
    if gate_first:
        y = y * F.silu(z.to(y.dtype))
    g = y.view(*y.shape[:-1], groups, -1)
    y = F.rms_norm(g, (g.shape[-1],), eps=eps).view_as(y) * weight.to(y.dtype)
    return y if gate_first else y * F.silu(z.to(y.dtype))


class Mamba2(nn.Module):
    ROLES = {"in_proj": ("ssm_in", "matrix"), "conv1d": ("conv", "conv"), "dt_bias": ("ssm_dt_bias", "vector"),
             "A_log": ("ssm_a", "vector"), "D": ("ssm_d", "vector"), "norm": ("ssm_norm", "norm"),
             "out_proj": ("ssm_out", "matrix")}   # roles of the parameters (engine/plan/tensors.py)

    def __init__(self, dims: Mamba2Dims, state_dtype: torch.dtype | None = None):
        super().__init__()
        self.dims, self.state_dtype = dims, state_dtype   # the decode cache's recurrent state (None: the input's)
        d, H = dims.d_model, dims.heads
        self.in_proj = nn.Linear(d, dims.proj_width, bias=dims.proj_bias)
        self.conv1d = make_conv(dims.conv_channels, dims.conv_kernel, dims.conv_bias)
        self.dt_bias = nn.Parameter(torch.empty(H))
        self.A_log = nn.Parameter(torch.empty(H))
        self.D = nn.Parameter(torch.empty(H))
        self.norm = GatedRMSNorm(dims.d_inner) if dims.gate != "gate" else None
        self.out_proj = nn.Linear(dims.d_inner, d, bias=dims.proj_bias)

    @torch.no_grad()
    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        """Matrices N(0, std) (out_proj out_std), the conv N(0, std) with a zero bias, and Mamba-2's own values:
        A = 1..H (A_log = log A), D = 1, dt_bias = softplus^-1 of dt drawn log-uniform in [0.001, 0.1]."""
        init_linear(self.in_proj, std, generator)
        init_linear(self.conv1d, std, generator)
        init_linear(self.out_proj, out_std, generator)
        H = self.dims.heads
        self.A_log.copy_(torch.arange(1, H + 1, dtype=torch.float32).log())
        self.D.fill_(1.0)
        u = torch.rand(H, generator=generator, device=self.dt_bias.device)
        dt = (u * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).exp()
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        if self.norm is not None:
            self.norm.weight.fill_(1.0)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None, rope: tuple | None = None,
                cache: LayerKV | None = None) -> torch.Tensor:
        """x [b, T, d_model] -> [b, T, d_model]; positions enter through the conv and the scan (pos and rope
        are not read). With a cache: the chunked scan continues from its state (a prompt), or, for one token
        after a first call, the recurrent step; either way the cache is updated. In training only in_proj's
        output and out_proj's input are kept for backward (ssm.recompute)."""
        s = self.dims.in_scale
        zxbcdt = self.in_proj(x * s if s != 1.0 else x)
        args = (zxbcdt, self.conv1d.weight, self.conv1d.bias, self.dt_bias, self.A_log, self.D,
                None if self.norm is None else self.norm.weight)
        y = self._mix(cache, *args) if cache is not None else recompute(partial(self._mix, None), *args)
        out = self.out_proj(y)
        return out * self.dims.out_scale if self.dims.out_scale != 1.0 else out

    def _mix(self, cache: LayerKV | None, zxbcdt: torch.Tensor, conv_w: torch.Tensor, conv_b: torch.Tensor | None,
             dt_bias: torch.Tensor, A_log: torch.Tensor, D: torch.Tensor, norm_w: torch.Tensor | None) -> torch.Tensor:
        """in_proj's output [b, T, proj_width] -> out_proj's input [b, T, d_in] (the input dtype)."""
        dims = self.dims
        b, T, _ = zxbcdt.shape
        H, P, G, N = dims.heads, dims.head_dim, dims.groups, dims.state
        if dims.proj_scales is not None:   # one scale per segment z, x, B, C, dt (Falcon-H1's mup_vector)
            scales = torch.tensor(dims.proj_scales, dtype=zxbcdt.dtype, device=zxbcdt.device)
            zxbcdt = zxbcdt * scales.repeat_interleave(torch.tensor(_segments(dims), device=zxbcdt.device),
                                                       output_size=dims.proj_width)
        z, xbc, dt = zxbcdt.split([dims.d_inner, dims.conv_channels, H], dim=-1)
        step = cache is not None and cache.recurrent is not None and T == 1
        ct = compute_dtype(zxbcdt)
        xs, B, C = silu_conv(xbc, conv_w, conv_b, cache).to(ct).split([dims.d_inner, G * N, G * N], dim=-1)
        dt = F.softplus(dt.to(ct) + dt_bias.to(ct))
        if dims.dt_min > 0 or dims.dt_max < math.inf:
            dt = dt.clamp(dims.dt_min, dims.dt_max)
        A = -A_log.to(ct).exp()
        xs = xs.reshape(b, T, H, P)
        if step:
            y, h = ssd.ssd_step(cache.recurrent.to(ct), xs[:, 0], dt[:, 0], A, B.view(b, G, N), C.view(b, G, N))
            y = y[:, None]
        else:
            y, h = ssd.ssd_chunked(xs, dt, A, B.reshape(b, T, G, N), C.reshape(b, T, G, N), dims.chunk,
                                   None if cache is None else cache.recurrent)
        if cache is not None:
            cache.recurrent = h.detach().to(self.state_dtype or zxbcdt.dtype)
        y = (y + xs * D.to(ct)[:, None]).reshape(b, T, dims.d_inner)
        y = y * F.silu(z.to(ct)) if norm_w is None else gated_rms_norm(y, z, norm_w, G, dims.norm_eps,
                                                                       dims.gate == "norm_gated")
        return y.to(zxbcdt.dtype)


def _segments(dims: Mamba2Dims) -> tuple[int, int, int, int, int]:
    """Widths of in_proj's five outputs: z, x, B, C, dt."""
    gn = dims.groups * dims.state
    return dims.d_inner, dims.d_inner, gn, gn, dims.heads


# ---- closed forms of one Mamba-2 layer: d = d_model, H, P, N, G, K, d_in = H*P, c = d_in + 2GN conv channels ----

def mamba2_params(dims: Mamba2Dims) -> dict[str, int]:
    """in_proj d*(2 d_in + 2GN + H) (+bias), conv c*K (+c), dt_bias, A_log, D: H each, norm d_in (none for the
    plain gate), out_proj d_in*d (+d)."""
    d, din, b = dims.d_model, dims.d_inner, dims.proj_bias
    return {"ssm_in": d * dims.proj_width + (dims.proj_width if b else 0),
            "ssm_conv": conv_params(dims.conv_channels, dims.conv_kernel, dims.conv_bias),
            "ssm_heads": 3 * dims.heads,
            "ssm_norm": din if dims.gate != "gate" else 0,
            "ssm_out": din * d + (d if b else 0)}


def mamba2_matmul_params(dims: Mamba2Dims) -> int:
    """Weights multiplied once per token (2 FLOPs each): in_proj, out_proj and the conv's K taps per channel
    (FlopCounterMode counts the depthwise conv's 2*K*c per token)."""
    return dims.d_model * dims.proj_width + dims.d_inner * dims.d_model + dims.conv_channels * dims.conv_kernel


def _products(dims: Mamba2Dims, T: int) -> tuple[int, ...]:
    return ssd.chunked_products(T, dims.chunk, dims.groups, dims.state, dims.heads, dims.head_dim)


def mamba2_scan_flops(dims: Mamba2Dims, T: int) -> int:
    """The chunked scan's products over one sequence of T tokens (ssd.chunked_products):
        2 * c*Q * (Q*(G*N + H*P) + 2*H*P*N),  c = ceil(T / Q)."""
    return sum(_products(dims, T)[:4])


def mamba2_prefill_flops(dims: Mamba2Dims, batch: int, T: int) -> int:
    """Forward FLOPs of the chunked form over `batch` sequences of T tokens: 2 per weight per token, and the
    scan's products (what FlopCounterMode counts; held against it in tests/test_mamba2.py)."""
    return batch * (2 * mamba2_matmul_params(dims) * T + mamba2_scan_flops(dims, T))


def mamba2_backward_flops(dims: Mamba2Dims, batch: int, T: int) -> int:
    """Backward FLOPs: both gradients (input and weight) of every weight, 2x its forward; the conv and the scan
    run once more first (ssm.recompute keeps nothing between in_proj and out_proj), then the scan products'
    gradients, 2x. With a single chunk (T <= Q) autograd skips what does not reach y: the end-state product
    (it only feeds the final state) and the gradient of the entering state (zeros)."""
    scores, values, ends, reads, chunks = _products(dims, T)
    scan = 2 * (scores + values + ends + reads) if chunks > 1 else 2 * (scores + values) + reads
    conv = 2 * dims.conv_channels * dims.conv_kernel * T
    return batch * (4 * mamba2_matmul_params(dims) * T + conv + mamba2_scan_flops(dims, T) + scan)


def mamba2_decode_flops(dims: Mamba2Dims) -> int:
    """FLOPs of one decoded token's state update beyond its weights (2 per weight, conv included, are the model's
    matmul count: engine/budget/flops.py decode_flops), counted by hand: 5*d_in*N + d_in + 2H (ssd.step_flops),
    constant in the context length."""
    return ssd.step_flops(dims.heads, dims.head_dim, dims.state)


def mamba2_saved_bytes(dims: Mamba2Dims, B: int, T: int, e: int) -> dict[str, int]:
    """Bytes autograd keeps for backward, its input excluded: in_proj's output and out_proj's input (and the
    scaled input with in_scale); the conv, scan and norm between them are recomputed (ssm.recompute)."""
    scaled = B * T * dims.d_model * e if dims.in_scale != 1.0 else 0
    return {"ssm_in_proj": B * T * dims.proj_width * e + scaled, "ssm_out_proj": B * T * dims.d_inner * e}


def mamba2_state_elements(dims: Mamba2Dims, conv_positions: int) -> dict[str, int]:
    """Per sequence: the conv window (positions x c channels) and the recurrent state H*P*N."""
    return {"conv": dims.conv_channels * conv_positions, "recurrent": dims.heads * dims.head_dim * dims.state}


# ---- declared fields and the registry entry -----------------------------------------------------------------
@dataclass(frozen=True)
class Mamba2Knobs(Knobs):
    """Mamba-2 layers (layer_types mamba2); the state size, conv and chunk are engine/layers/ssm.py's SSMKnobs."""
    ssm_heads: int | None = declare(None, "ssm", "H: Mamba-2 heads, each with its own decay (A, dt) per token; "
                                    "the inner width is H*ssm_head_dim.", lo=1,
                                    null="2*d_model // ssm_head_dim (expand 2)")
    ssm_head_dim: int = declare(64, "ssm", "P: channels per Mamba-2 head.", lo=1)
    ssm_groups: int = declare(1, "ssm", "G: B and C (what is written to and read from the state) are shared by "
                              "the heads of a group, as key/value heads in GQA; must divide ssm_heads.", lo=1)
    ssm_gate: str = declare("norm_gated", "ssm", "How the output gate z meets the grouped RMSNorm: "
                            + "; ".join(f"{k}: {v}" for k, v in GATES.items()) + ".", choices=tuple(GATES))
    ssm_dt_min: float = declare(0.0, "ssm", "dt is clamped from below at this value (transformers' "
                                "time_step_limit; Nemotron-H: time_step_min).", lo=0)
    ssm_dt_max: float | None = declare(None, "ssm", "dt is clamped from above at this value.", lo=0,
                                       lo_open=True, null="no upper limit")
    ssm_in_scale: float = declare(1.0, "ssm", "Falcon-H1 ssm_in_multiplier: the mixer's input is scaled by this.",
                                  lo=0, lo_open=True)
    ssm_proj_scales: tuple[float, ...] | None = declare(
        None, "ssm", "Falcon-H1 ssm_multipliers: five scales of the input projection's outputs z, x, B, C, dt.",
        lo=0, lo_open=True, null="all one")
    ssm_out_scale: float = declare(1.0, "ssm", "The mixer's output is scaled by this before the residual add "
                                   "(Falcon-H1 ssm_out_multiplier, Granite residual_multiplier).", lo=0, lo_open=True)

    @property
    def ssm_head_count(self) -> int:
        return self.ssm_heads if self.ssm_heads is not None else max(1, 2 * self.d_model // self.ssm_head_dim)

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        """Checked only when some layer is Mamba-2: groups divide the heads, five projection scales, dt limits
        in order."""
        if not ok("layer_types") or not c.uses("mamba2"):
            return []
        out = []
        if ok("ssm_heads", "ssm_groups", "ssm_head_dim", "d_model") and c.ssm_head_count % c.ssm_groups:
            out.append(f"ssm_groups: {c.ssm_groups} does not divide ssm_heads={c.ssm_head_count}")
        if ok("ssm_proj_scales") and c.ssm_proj_scales is not None and len(c.ssm_proj_scales) != 5:
            out.append(f"ssm_proj_scales: five scales (z, x, B, C, dt), got {len(c.ssm_proj_scales)}")
        if ok("ssm_dt_min", "ssm_dt_max") and c.ssm_dt_max is not None and c.ssm_dt_max < c.ssm_dt_min:
            out.append(f"ssm_dt_max: {c.ssm_dt_max:g} is below ssm_dt_min={c.ssm_dt_min:g}")
        return out


def mamba2_dims(cfg: ModelConfig) -> Mamba2Dims:
    """The layer's explicit dimensions from a config (the gated norm's epsilon is the model's norm_eps)."""
    scales = cfg.ssm_proj_scales
    return Mamba2Dims(cfg.d_model, cfg.ssm_head_count, cfg.ssm_head_dim, cfg.ssm_state, cfg.ssm_groups,
                      cfg.ssm_conv_kernel, cfg.ssm_chunk, cfg.ssm_conv_bias, cfg.ssm_proj_bias, cfg.ssm_gate,
                      cfg.norm_eps, cfg.ssm_dt_min, math.inf if cfg.ssm_dt_max is None else cfg.ssm_dt_max,
                      cfg.ssm_in_scale, None if scales is None else tuple(scales), cfg.ssm_out_scale)


class Mamba2Mixer(Mixer):
    """Mamba-2 as a layer kind: layer_types `mamba2` (Falcon-H1: `full+mamba2`, beside attention)."""
    name, label, words, attr = "mamba2", "Mamba-2", ("mamba2",), "mamba"
    components = ("ssm_in", "ssm_conv", "ssm_heads", "ssm_norm", "ssm_out")
    recurrent = True
    transformers_state_dtype = "fp32"   # mamba2_chunk_scan computes and returns the state in fp32

    def summary(self, cfg):
        d = mamba2_dims(cfg)
        return [self.label, f"in_proj to z, x ({d.heads} heads x {d.head_dim}), B, C ({d.groups} groups x "
                f"{d.state}), dt", f"conv {d.conv_kernel} taps over {d.conv_channels:,} channels, then SiLU",
                f"scan: a {d.head_dim}x{d.state} state per head", f"{GATES[d.gate]}, out_proj"]

    def build(self, cfg, spec):
        return Mamba2(mamba2_dims(cfg), TORCH_DTYPES[cfg.state_dtype] if cfg.state_dtype else None)

    def params(self, cfg, spec):
        return mamba2_params(mamba2_dims(cfg))

    def matmul_params(self, cfg, spec):
        return mamba2_matmul_params(mamba2_dims(cfg))

    def forward_flops(self, cfg, spec, batch, seq, causal):
        return batch * mamba2_scan_flops(mamba2_dims(cfg), seq)

    def backward_flops(self, cfg, spec, batch, seq, causal):
        """Beyond the weights' 2x: the conv and scan run again, then the scan's gradients."""
        dims = mamba2_dims(cfg)
        return mamba2_backward_flops(dims, batch, seq) - 4 * batch * seq * mamba2_matmul_params(dims)

    def decode_flops(self, cfg, spec, batch, context):
        return batch * mamba2_decode_flops(mamba2_dims(cfg))

    def state_elements(self, cfg, conv_positions):
        dims = mamba2_dims(cfg)
        return mamba2_state_elements(dims, conv_positions(dims.conv_kernel))

    def saved_bytes(self, cfg, spec, B, T, e, impl, add):
        for term, n in mamba2_saved_bytes(mamba2_dims(cfg), B, T, e).items():
            add(term, n)
