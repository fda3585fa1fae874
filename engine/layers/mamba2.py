"""Mamba-2 mixer (SSD, Dao & Gu 2024), as transformers' Mamba2Mixer and the hybrid families' mixers compute it.

    z, xBC, dt = in_proj(x)                     widths d_in, d_in + 2*G*N, H        (d_in = H*P)
    x, B, C    = silu(conv1d(xBC))              depthwise, kernel K, causal
    dt         = clamp(softplus(dt + dt_bias), dt_limit);   A = -exp(A_log)          one of each per head
    h_t        = exp(dt_t*A) h_{t-1} + dt_t x_t B_t^T       per head: P x N, B and C shared by the H/G heads of a group
    y_t        = h_t C_t + D x_t;   out = out_proj(gate(y, z))

Two forms of the scan give the same y: `ssd_chunked` (training and prefill: inside chunks of Q tokens an
attention-like masked product, between chunks the state carried forward) and `ssd_step` (decode: one token
updates the fixed-size state). Below the module: its closed forms (params, state bytes, FLOPs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.init import init_linear
from engine.layers.ssm import SSMState, causal_conv, conv_params, make_conv, recompute, state_bytes
from engine.validation import Knobs, declare

if TYPE_CHECKING:
    from engine.config import ModelConfig

# y is normalised per group of d_in/G channels; the gate z enters before the norm (Mamba-2's own RMSNormGated,
# Bamba, Nemotron-H, Granite-4.0-H), after it (Falcon-H1 mamba_norm_before_gate), or alone (mamba_rms_norm off)
GATES = {"norm_gated": "RMSNorm(y * silu(z)) per group", "gate_normed": "RMSNorm(y) * silu(z) per group",
         "gate": "y * silu(z), no norm"}


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
    ssm_dt_min: float = declare(0.0, "ssm", "dt is clamped from below at this value in the chunked scan "
                                "(transformers' time_step_limit; Nemotron-H: time_step_min).", lo=0)
    ssm_dt_max: float | None = declare(None, "ssm", "dt is clamped from above at this value.", lo=0,
                                       lo_open=True, null="no upper limit")
    ssm_in_scale: float = declare(1.0, "ssm", "Falcon-H1 ssm_in_multiplier: the mixer's input is scaled by this.",
                                  lo=0, lo_open=True)
    ssm_proj_scales: tuple[float, ...] | None = declare(
        None, "ssm", "Falcon-H1 ssm_multipliers: five scales of the input projection's outputs z, x, B, C, dt.",
        null="all one")

    @property
    def ssm_head_count(self) -> int:
        return self.ssm_heads if self.ssm_heads is not None else max(1, 2 * self.d_model // self.ssm_head_dim)

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        """Checked only when some layer is Mamba-2: groups divide the heads, five projection scales, dt limits
        in order."""
        if not c.uses("mamba2"):
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
                      cfg.ssm_in_scale, None if scales is None else tuple(scales))


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
    """RMSNorm over each of `groups` equal slices of the channels (fp32), times the gain, with the silu gate
    applied before it (Mamba-2) or after it (Falcon-H1 mamba_norm_before_gate)."""
    if gate_first:
        y = y * F.silu(z.float())
    g = y.view(*y.shape[:-1], groups, -1)
    y = F.rms_norm(g, (g.shape[-1],), eps=eps).view_as(y) * weight.float()
    return y if gate_first else y * F.silu(z.float())


def ssd_chunked(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, chunk: int,
                h0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The scan over a sequence in chunks (fp32). x [b, T, H, P], dt [b, T, H], A [H], B, C [b, T, G, N], h0
    [b, H, P, N] or None -> y [b, T, H, P] (without D x) and the final state [b, H, P, N].
    Per chunk of Q tokens: y_diag = (C B^T * exp(cumA_i - cumA_j), j <= i) (dt x), the chunk's own end state
    S = sum_j exp(cumA_Q - cumA_j) (dt x)_j B_j^T, then the state entering each chunk carried from chunk to chunk,
    read by y_off = exp(cumA_i) C_i h_in. Zero padding to whole chunks has dt = 0: no decay, no input."""
    b, T, H, P = x.shape
    G, N, Q = B.shape[2], B.shape[3], chunk
    R, pad = H // G, (-T) % chunk
    if pad:
        x, dt, B, C = (F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)) for t in (x, dt, B, C))
    c = (T + pad) // Q
    a = (dt * A).view(b, c, Q, G, R).permute(0, 1, 3, 4, 2)                  # [b, c, G, R, Q]
    acum = a.cumsum(-1)
    xdt = (x * dt[..., None]).view(b, c, Q, G, R, P).permute(0, 1, 3, 4, 2, 5)   # [b, c, G, R, Q, P]
    Bc = B.view(b, c, Q, G, N).transpose(2, 3)                              # [b, c, G, Q, N]
    Cc = C.view(b, c, Q, G, N).transpose(2, 3)
    causal = torch.ones(Q, Q, dtype=torch.bool, device=x.device).tril()
    decay = (acum[..., :, None] - acum[..., None, :]).masked_fill_(~causal, -math.inf).exp_()  # [b, c, G, R, Q, Q]
    y = ((Cc @ Bc.transpose(-1, -2))[:, :, :, None] * decay) @ xdt         # [b, c, G, R, Q, P]
    to_end = (acum[..., -1:] - acum).exp()[..., None]                       # [b, c, G, R, Q, 1]
    ends = (xdt * to_end).permute(0, 1, 2, 4, 3, 5).reshape(b, c, G, Q, R * P).transpose(-1, -2) @ Bc
    ends = ends.view(b, c, G, R, P, N)
    h = x.new_zeros(b, G, R, P, N) if h0 is None else h0.float().view(b, G, R, P, N)
    carry = acum[..., -1].exp()[..., None, None]                            # [b, c, G, R, 1, 1]
    entering = []
    for i in range(c):
        entering.append(h)
        h = carry[:, i] * h + ends[:, i]
    h_in = torch.stack(entering, 1).permute(0, 1, 2, 5, 3, 4).reshape(b, c, G, N, R * P)
    y_off = (Cc @ h_in).view(b, c, G, Q, R, P).transpose(3, 4) * acum.exp()[..., None]
    y = (y + y_off).permute(0, 1, 4, 2, 3, 5).reshape(b, c * Q, H, P)
    return y[:, :T], h.view(b, H, P, N)


def ssd_step(h: torch.Tensor, x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
             C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token (fp32): h [b, H, P, N], x [b, H, P], dt [b, H], B, C [b, G, N] -> y [b, H, P] (without D x) and
    the new state. h' = exp(dt A) h + (dt x) B^T;  y = h' C."""
    R = h.shape[1] // B.shape[1]
    Bh, Ch = B.repeat_interleave(R, 1), C.repeat_interleave(R, 1)          # [b, H, N]
    h = h * (dt * A).exp()[..., None, None] + (x * dt[..., None])[..., None] * Bh[:, :, None]
    return (h @ Ch[..., None]).squeeze(-1), h


class Mamba2(nn.Module):
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
        scales = dims.proj_scales
        self.proj_scale = None if scales is None else nn.Buffer(torch.cat([
            torch.full((w,), float(s)) for w, s in zip(_segments(dims), scales)]), persistent=False)

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
                cache: SSMState | None = None) -> torch.Tensor:
        """x [b, T, d_model] -> [b, T, d_model]. With a state: the chunked scan continues from it (a prompt), or,
        for one token after a first call, the recurrent step; either way the state is updated. In training only
        in_proj's output and out_proj's input are kept for backward (ssm.recompute)."""
        s = self.dims.in_scale
        zxbcdt = self.in_proj(x * s if s != 1.0 else x)
        args = (zxbcdt, self.conv1d.weight, self.conv1d.bias, self.dt_bias, self.A_log, self.D,
                None if self.norm is None else self.norm.weight)
        y = self._mix(cache, *args) if cache is not None else recompute(partial(self._mix, None), *args)
        return self.out_proj(y)

    def _mix(self, cache: SSMState | None, zxbcdt: torch.Tensor, conv_w: torch.Tensor, conv_b: torch.Tensor | None,
             dt_bias: torch.Tensor, A_log: torch.Tensor, D: torch.Tensor, norm_w: torch.Tensor | None) -> torch.Tensor:
        """in_proj's output [b, T, proj_width] -> out_proj's input [b, T, d_in] (the input dtype)."""
        dims = self.dims
        b, T, _ = zxbcdt.shape
        H, P, G, N = dims.heads, dims.head_dim, dims.groups, dims.state
        if self.proj_scale is not None:
            zxbcdt = zxbcdt * self.proj_scale.to(zxbcdt.dtype)
        z, xbc, dt = zxbcdt.split([dims.d_inner, dims.conv_channels, H], dim=-1)
        step = cache is not None and cache.recurrent is not None and T == 1
        xs, B, C = causal_conv(xbc, conv_w, conv_b, cache).float().split([dims.d_inner, G * N, G * N], dim=-1)
        dt = F.softplus(dt.float() + dt_bias.float())
        if dims.dt_min > 0 or dims.dt_max < math.inf:
            dt = dt.clamp(dims.dt_min, dims.dt_max)
        A = -A_log.float().exp()
        xs = xs.reshape(b, T, H, P)
        if step:
            y, h = ssd_step(cache.recurrent.float(), xs[:, 0], dt[:, 0], A, B.view(b, G, N), C.view(b, G, N))
            y = y[:, None]
        else:
            y, h = ssd_chunked(xs, dt, A, B.reshape(b, T, G, N), C.reshape(b, T, G, N), dims.chunk,
                               None if cache is None else cache.recurrent)
        if cache is not None:
            cache.recurrent = h.detach().to(self.state_dtype or zxbcdt.dtype)
        y = (y + xs * D.float()[:, None]).reshape(b, T, dims.d_inner)
        y = y * F.silu(z.float()) if norm_w is None else gated_rms_norm(y, z, norm_w, G, dims.norm_eps,
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
    """Weights in matrix products per token: in_proj and out_proj."""
    return dims.d_model * dims.proj_width + dims.d_inner * dims.d_model


def mamba2_state_bytes(dims: Mamba2Dims, e: int, convention: str = "transformers",
                       ssm_e: int | None = None) -> dict[str, int]:
    """One sequence's decode state: conv (K or K-1 positions) * c channels, recurrent H*P*N (see ssm.CONVENTIONS)."""
    return state_bytes(dims.conv_channels, dims.conv_kernel, dims.heads * dims.head_dim * dims.state, e,
                       convention, ssm_e)


def _scan_products(dims: Mamba2Dims, T: int) -> tuple[int, int, int, int, int]:
    """FLOPs of ssd_chunked's four products over one sequence of T tokens (padded to c chunks of Q): C B^T per
    group, the masked scores times dt x, the chunks' end states, the entering states read by C; and c."""
    Q, G, N, H, P = dims.chunk, dims.groups, dims.state, dims.heads, dims.head_dim
    c = -(-T // Q)
    return 2 * c * Q * Q * N * G, 2 * c * Q * Q * P * H, 2 * c * P * Q * N * H, 2 * c * Q * N * P * H, c


def mamba2_scan_flops(dims: Mamba2Dims, T: int) -> int:
    """Matrix-product FLOPs of ssd_chunked over one sequence of T tokens (padded to c whole chunks of Q), as
    FlopCounterMode counts its four products per chunk: C B^T per group 2*Q*Q*N*G, the masked scores times
    dt x 2*Q*Q*P*H, the chunk's end state 2*P*Q*N*H, the entering state read by C 2*Q*N*P*H:
        2 * c*Q * (Q*(G*N + H*P) + 2*H*P*N).
    The decay masks, exponentials and the carry between chunks are elementwise and not counted."""
    return sum(_scan_products(dims, T)[:4])


def mamba2_conv_flops(dims: Mamba2Dims, T: int) -> int:
    """The depthwise conv: 2*K multiply-adds per channel and token."""
    return 2 * dims.conv_kernel * dims.conv_channels * T


def mamba2_prefill_flops(dims: Mamba2Dims, batch: int, T: int) -> int:
    """Forward FLOPs of the chunked form over `batch` sequences of T tokens: projections, conv and scan
    products (what FlopCounterMode counts; held against it in tests/test_mamba2.py)."""
    return batch * (2 * mamba2_matmul_params(dims) * T + mamba2_conv_flops(dims, T) + mamba2_scan_flops(dims, T))


def mamba2_backward_flops(dims: Mamba2Dims, batch: int, T: int) -> int:
    """Backward FLOPs: both gradients (input and weight) of every projection, 2x their forward; the conv and the
    scan run once more (ssm.recompute keeps nothing between in_proj and out_proj), then their gradients: the
    conv's and the scan products' 2x. With a single chunk (T <= Q) autograd skips what does not reach y: the
    end-state product (it only feeds the final state) and the gradient of the entering state (zeros)."""
    scores, values, ends, reads, chunks = _scan_products(dims, T)
    scan = 2 * (scores + values + ends + reads) if chunks > 1 else 2 * (scores + values) + reads
    proj, conv = 2 * mamba2_matmul_params(dims) * T, mamba2_conv_flops(dims, T)
    return batch * (2 * proj + 3 * conv + mamba2_scan_flops(dims, T) + scan)


def mamba2_decode_flops(dims: Mamba2Dims) -> dict[str, int]:
    """FLOPs of one decoded token, by part. The state update, counted by hand (one FLOP per elementwise
    multiply, add or exp; 2 per multiply-add of a product), for d_in = H*P channels of N states each:
        dt*A, exp: 2H;  dt*x: d_in;  h*exp(dtA), (dt x) B^T, their sum: 3*d_in*N;  h C: 2*d_in*N
    = 5*d_in*N + d_in + 2H, constant in the context length (tests/test_mamba2.py counts ssd_step's ops)."""
    din, N = dims.d_inner, dims.state
    return {"matmul": 2 * mamba2_matmul_params(dims), "conv": mamba2_conv_flops(dims, 1),
            "scan": 5 * din * N + din + 2 * dims.heads}
