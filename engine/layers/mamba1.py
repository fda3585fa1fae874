"""Mamba-1 mixer (selective scan, Gu & Dao 2023), as transformers' JambaMambaMixer and MambaMixer compute it.

    x, z   = in_proj(u)                        two halves of width D = d_inner
    x      = silu(conv1d(x))                   depthwise, kernel K, causal
    dt_r, B, C = x_proj(x)                     widths R (dt rank), N, N; Jamba RMS-normalises each of the three
    dt     = softplus(dt_proj(dt_r));  A = -exp(A_log)                             dt [D], A [D, N]
    h_t    = exp(dt_t A) * h_{t-1} + (dt_t x_t) B_t^T                            per channel: N states
    y_t    = h_t C_t + D x_t;   out = out_proj(y * silu(z))

Unlike Mamba-2 every channel has its own decay per state (A is D x N), so the scan has no attention-like
matrix form. `selective_scan` runs it in chunks of L tokens: every chunk scans from a zero state at once
(L steps, all chunks together), then the states entering the chunks are carried across (T/L steps) and
added back decayed: L + T/L sequential steps instead of T. `selective_step` is one decode token. The decode
cache (attention.LayerKV) keeps the conv's last K-1 inputs and h. Below the module: its closed forms, then the
declared fields (`Mamba1Knobs`) and the registry entry (`Mamba1Mixer`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.attention import LayerKV
from engine.layers.init import init_linear
from engine.layers.kinds import Mixer
from engine.layers.short_conv import conv_params
from engine.layers.ssm import compute_dtype, make_conv, recompute, silu_conv
from engine.runtime import TORCH_DTYPES
from engine.validation import Knobs, declare

if TYPE_CHECKING:
    from engine.config import ModelConfig


@dataclass(frozen=True)
class Mamba1Dims:
    d_model: int
    d_inner: int                   # D (expand * d_model)
    state: int                     # N
    dt_rank: int                   # R
    conv_kernel: int = 4           # K
    conv_bias: bool = True
    proj_bias: bool = False        # in_proj and out_proj (x_proj has none, dt_proj always one)
    bcdt_norm: bool = False        # Jamba: RMSNorm (no gate) on dt_r, B and C
    norm_eps: float = 1e-6
    chunk: int | None = None       # L: tokens per chunk of selective_scan (None: about sqrt(T), fewest steps)


def selective_scan(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                   chunk: int | None = None, h0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The scan over a sequence (fp32): x, dt [b, T, D], A [D, N], B, C [b, T, N], h0 [b, D, N] or None ->
    y [b, T, D] (without D x) and the final state [b, D, N]. Zero padding to whole chunks has dt = 0. The chunk
    length changes neither the result nor the products, only the number of sequential steps."""
    b, T, D = x.shape
    L = chunk or math.isqrt(T - 1) + 1
    N, pad = A.shape[1], (-T) % L
    if pad:
        x, dt, B, C = (F.pad(t, (0, 0, 0, pad)) for t in (x, dt, B, C))
    c = (T + pad) // L
    dtA = (dt[..., None] * A).view(b, c, L, D, N)
    u = ((dt * x)[..., None] * B[:, :, None]).view(b, c, L, D, N)        # (dt x) B^T
    decay = dtA.exp()
    h, local = x.new_zeros(b, c, D, N), []
    for i in range(L):                                                   # every chunk from a zero state
        h = decay[:, :, i] * h + u[:, :, i]
        local.append(h)
    local = torch.stack(local, 2)                                        # [b, c, L, D, N]
    since_start = dtA.cumsum(2).exp()                                    # decay from the chunk's start
    h = x.new_zeros(b, D, N) if h0 is None else h0.to(x.dtype)
    entering = []
    for i in range(c):                                                   # carry the state across chunks
        entering.append(h)
        h = since_start[:, i, -1] * h + local[:, i, -1]
    states = (local + since_start * torch.stack(entering, 1)[:, :, None]).view(b, c * L, D, N)
    return (states[:, :T] @ C[:, :T, :, None]).squeeze(-1), h


def selective_step(h: torch.Tensor, x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                   C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token (fp32): h [b, D, N], x, dt [b, D], B, C [b, N] -> y [b, D] (without D x) and the new state."""
    h = (dt[..., None] * A).exp() * h + (dt * x)[..., None] * B[:, None]
    return (h @ C[..., None]).squeeze(-1), h


class Mamba1(nn.Module):
    # roles of the parameters (engine/plan/tensors.py), named as llama.cpp names them; A_log is [D, N] but a
    # per-channel vector for the planner (llama.cpp's ssm_a, never quantized)
    ROLES = {"in_proj": ("ssm_in", "matrix"), "conv1d": ("conv", "conv"), "x_proj": ("ssm_x", "matrix"),
             "dt_proj": ("ssm_dt", "matrix"), "A_log": ("ssm_a", "vector"), "D": ("ssm_d", "vector"),
             "out_proj": ("ssm_out", "matrix"), "dt_norm": ("ssm_norm", "norm"), "b_norm": ("ssm_norm", "norm"),
             "c_norm": ("ssm_norm", "norm")}

    def __init__(self, dims: Mamba1Dims, state_dtype: torch.dtype | None = None):
        super().__init__()
        self.dims, self.state_dtype = dims, state_dtype   # the decode cache's recurrent state (None: the input's)
        d, D, N, R = dims.d_model, dims.d_inner, dims.state, dims.dt_rank
        self.in_proj = nn.Linear(d, 2 * D, bias=dims.proj_bias)
        self.conv1d = make_conv(D, dims.conv_kernel, dims.conv_bias)
        self.x_proj = nn.Linear(D, R + 2 * N, bias=False)
        self.dt_proj = nn.Linear(R, D, bias=True)
        self.A_log = nn.Parameter(torch.empty(D, N))
        self.D = nn.Parameter(torch.empty(D))
        self.out_proj = nn.Linear(D, d, bias=dims.proj_bias)
        self.dt_norm, self.b_norm, self.c_norm = ((nn.RMSNorm(w, eps=dims.norm_eps) for w in (R, N, N))
                                                  if dims.bcdt_norm else (None, None, None))

    @torch.no_grad()
    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        """Matrices N(0, std) (out_proj out_std), and Mamba's own values: A = 1..N in every channel, D = 1,
        dt_proj's bias softplus^-1 of dt drawn log-uniform in [0.001, 0.1]; norm gains one."""
        for layer in (self.in_proj, self.conv1d, self.x_proj, self.dt_proj):
            init_linear(layer, std, generator)
        init_linear(self.out_proj, out_std, generator)
        N = self.dims.state
        self.A_log.copy_(torch.arange(1, N + 1, dtype=torch.float32).log().expand_as(self.A_log))
        self.D.fill_(1.0)
        u = torch.rand(self.dims.d_inner, generator=generator, device=self.D.device)
        dt = (u * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).exp()
        self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        for norm in (self.dt_norm, self.b_norm, self.c_norm):
            if norm is not None:
                norm.weight.fill_(1.0)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None, rope: tuple | None = None,
                cache: LayerKV | None = None) -> torch.Tensor:
        """x [b, T, d_model] -> [b, T, d_model]; a state is continued and updated as in Mamba2.forward, and in
        training only in_proj's output and out_proj's input are kept for backward (ssm.recompute)."""
        norms = (self.dt_norm, self.b_norm, self.c_norm)
        args = (self.in_proj(x), self.conv1d.weight, self.conv1d.bias, self.x_proj.weight, self.dt_proj.weight,
                self.dt_proj.bias, self.A_log, self.D, *(None if n is None else n.weight for n in norms))
        y = self._mix(cache, *args) if cache is not None else recompute(partial(self._mix, None), *args)
        return self.out_proj(y)

    def _mix(self, cache: LayerKV | None, xz: torch.Tensor, conv_w: torch.Tensor, conv_b: torch.Tensor | None,
             x_w: torch.Tensor, dt_w: torch.Tensor, dt_b: torch.Tensor, A_log: torch.Tensor, D: torch.Tensor,
             dt_g: torch.Tensor | None, b_g: torch.Tensor | None, c_g: torch.Tensor | None) -> torch.Tensor:
        """in_proj's output [b, T, 2D] -> out_proj's input [b, T, D] (the input dtype)."""
        dims = self.dims
        T = xz.shape[1]
        step = cache is not None and cache.recurrent is not None and T == 1
        xs, z = xz.chunk(2, dim=-1)
        xs = silu_conv(xs, conv_w, conv_b, cache)
        dt, B, C = F.linear(xs, x_w).split([dims.dt_rank, dims.state, dims.state], dim=-1)
        if dt_g is not None:
            eps = dims.norm_eps
            dt, B, C = (F.rms_norm(t, (t.shape[-1],), g, eps) for t, g in ((dt, dt_g), (B, b_g), (C, c_g)))
        ct = compute_dtype(xz)
        dt = F.softplus(F.linear(dt, dt_w).to(ct) + dt_b.to(ct))
        A = -A_log.to(ct).exp()
        xs, B, C = xs.to(ct), B.to(ct), C.to(ct)
        if step:
            y, h = selective_step(cache.recurrent.to(ct), xs[:, 0], dt[:, 0], A, B[:, 0], C[:, 0])
            y = y[:, None]
        else:
            y, h = selective_scan(xs, dt, A, B, C, dims.chunk, None if cache is None else cache.recurrent)
        if cache is not None:
            cache.recurrent = h.detach().to(self.state_dtype or xz.dtype)
        return ((y + xs * D.to(ct)) * F.silu(z.to(ct))).to(xz.dtype)


# ---- closed forms of one Mamba-1 layer: d = d_model, D = d_inner, N, R = dt_rank, K ----

def mamba1_params(dims: Mamba1Dims) -> dict[str, int]:
    """in_proj d*2D (+2D), conv D*K (+D), x_proj D*(R + 2N), dt_proj R*D + D, A_log D*N, D, Jamba's norms R + 2N,
    out_proj D*d (+d)."""
    d, D, N, R, b = dims.d_model, dims.d_inner, dims.state, dims.dt_rank, dims.proj_bias
    return {"ssm_in": d * 2 * D + (2 * D if b else 0),
            "ssm_conv": conv_params(D, dims.conv_kernel, dims.conv_bias),
            "ssm_dt_bc": D * (R + 2 * N) + R * D + D,
            "ssm_heads": D * N + D,
            "ssm_norm": R + 2 * N if dims.bcdt_norm else 0,
            "ssm_out": D * d + (d if b else 0)}


def mamba1_matmul_params(dims: Mamba1Dims) -> int:
    """Weights multiplied once per token (2 FLOPs each): in_proj, x_proj, dt_proj, out_proj and the conv's K
    taps per channel."""
    d, D, N, R = dims.d_model, dims.d_inner, dims.state, dims.dt_rank
    return d * 2 * D + D * (R + 2 * N) + R * D + D * d + D * dims.conv_kernel


def mamba1_saved_bytes(dims: Mamba1Dims, B: int, T: int, e: int) -> dict[str, int]:
    """Bytes autograd keeps for backward, its input excluded: in_proj's output and out_proj's input; everything
    between them is recomputed (ssm.recompute)."""
    return {"ssm_in_proj": B * T * 2 * dims.d_inner * e, "ssm_out_proj": B * T * dims.d_inner * e}


def mamba1_state_elements(dims: Mamba1Dims, conv_positions: int) -> dict[str, int]:
    """Per sequence: the conv window (positions x D channels) and the recurrent state D*N."""
    return {"conv": dims.d_inner * conv_positions, "recurrent": dims.d_inner * dims.state}


def mamba1_prefill_flops(dims: Mamba1Dims, batch: int, T: int) -> int:
    """Forward FLOPs of the chunked scan over `batch` sequences of T tokens as FlopCounterMode counts them: 2 per
    weight per token and reading the states, h C, 2*D*N per token. The scan's own updates are elementwise (not
    counted there): about 7*D*N per token, as in decode."""
    return batch * T * (2 * mamba1_matmul_params(dims) + 2 * dims.d_inner * dims.state)


def mamba1_backward_flops(dims: Mamba1Dims, batch: int, T: int) -> int:
    """Backward FLOPs: both gradients of in_proj and out_proj (2x their forward); everything between them (x_proj,
    dt_proj, the conv, reading the states) runs once more (ssm.recompute), then its gradients: 3x."""
    d, D = dims.d_model, dims.d_inner
    outer = batch * T * 2 * (d * 2 * D + D * d)
    return 2 * outer + 3 * (mamba1_prefill_flops(dims, batch, T) - outer)


def mamba1_decode_flops(dims: Mamba1Dims) -> int:
    """FLOPs of one decoded token's state update beyond its weights (2 per weight, conv included, are the model's
    matmul count: engine/budget/flops.py decode_flops), counted by hand (one FLOP per elementwise multiply, add or
    exp; 2 per multiply-add of a product), for D channels of N states:
        dt*A, its exp: 2*D*N;  dt*x: D;  h*exp(dt A), (dt x) B^T, their sum: 3*D*N;  h C: 2*D*N
    = 7*D*N + D (A differs per channel and state, so dt*A costs D*N here against H for Mamba-2)."""
    D, N = dims.d_inner, dims.state
    return 7 * D * N + D


# ---- declared fields and the registry entry -----------------------------------------------------------------
@dataclass(frozen=True)
class Mamba1Knobs(Knobs):
    """Mamba-1 layers (layer_types mamba1); the state size, conv and biases are engine/layers/ssm.py's SSMKnobs."""
    ssm_inner: int | None = declare(None, "ssm", "D: Mamba-1's inner width, every channel with its own N decays.",
                                    lo=1, null="2*d_model (expand 2)")
    ssm_dt_rank: int | None = declare(None, "ssm", "R: dt comes from a rank-R projection of each token.", lo=1,
                                      null="ceil(d_model / 16)")
    ssm_dt_norm: bool = declare(False, "ssm", "RMSNorm on dt's low-rank input, B and C (Jamba).")

    @property
    def ssm_inner_width(self) -> int:
        return self.ssm_inner if self.ssm_inner is not None else 2 * self.d_model

    @property
    def ssm_dt_rank_width(self) -> int:
        return self.ssm_dt_rank if self.ssm_dt_rank is not None else math.ceil(self.d_model / 16)


def mamba1_dims(cfg: ModelConfig) -> Mamba1Dims:
    """The layer's explicit dimensions from a config (the dt/B/C norms' epsilon is the model's norm_eps)."""
    return Mamba1Dims(cfg.d_model, cfg.ssm_inner_width, cfg.ssm_state, cfg.ssm_dt_rank_width, cfg.ssm_conv_kernel,
                      cfg.ssm_conv_bias, cfg.ssm_proj_bias, cfg.ssm_dt_norm, cfg.norm_eps)


class Mamba1Mixer(Mixer):
    """Mamba-1 as a layer kind: layer_types `mamba1` (Jamba)."""
    name, label, words, attr = "mamba1", "Mamba-1", ("mamba1",), "mamba"
    components = ("ssm_in", "ssm_conv", "ssm_dt_bc", "ssm_heads", "ssm_norm", "ssm_out")
    recurrent = True
    transformers_state_dtype = "fp32"   # mamba_selective_scan's state is fp32 after its first step (dt, A are fp32)

    def summary(self, cfg):
        d = mamba1_dims(cfg)
        return [self.label, f"in_proj to x, z ({d.d_inner:,} channels each)",
                f"conv {d.conv_kernel} taps, then SiLU; x_proj to dt (rank {d.dt_rank}), B, C ({d.state})",
                f"selective scan: {d.state} states per channel", "y * silu(z), out_proj"]

    def build(self, cfg, spec):
        return Mamba1(mamba1_dims(cfg), TORCH_DTYPES[cfg.state_dtype] if cfg.state_dtype else None)

    def params(self, cfg, spec):
        return mamba1_params(mamba1_dims(cfg))

    def matmul_params(self, cfg, spec):
        return mamba1_matmul_params(mamba1_dims(cfg))

    def forward_flops(self, cfg, spec, batch, seq, causal):
        d = mamba1_dims(cfg)
        return 2 * batch * seq * d.d_inner * d.state   # reading the states: h C per token

    def backward_flops(self, cfg, spec, batch, seq, causal):
        """Beyond 2x the weights of in_proj and out_proj: the rest runs again, then its gradients, 3x."""
        d = mamba1_dims(cfg)
        return mamba1_backward_flops(d, batch, seq) - 4 * batch * seq * mamba1_matmul_params(d)

    def decode_flops(self, cfg, spec, batch, context):
        return batch * mamba1_decode_flops(mamba1_dims(cfg))

    def state_elements(self, cfg, conv_positions):
        d = mamba1_dims(cfg)
        return mamba1_state_elements(d, conv_positions(d.conv_kernel))

    def saved_bytes(self, cfg, spec, B, T, e, impl, add):
        for term, n in mamba1_saved_bytes(mamba1_dims(cfg), B, T, e).items():
            add(term, n)
