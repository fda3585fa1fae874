"""Gated DeltaNet (Yang, Kautz, Hatamizadeh 2024), the linear-attention mixer of Qwen3-Next and Qwen3.5.

    [q | k | v], z, b, a = x W_qkv, x W_z, x W_b, x W_a   q, k: nk heads of dk; v, z: nv heads of dv;
                                                     b, a: one number per value head
    q, k, v = silu(causal_conv_K([q | k | v]))       a short depthwise convolution over the last K tokens
    q, k = l2norm(q) / sqrt(dk), l2norm(k)           each key head serves nv/nk value heads
    beta = sigmoid(b);  g = -exp(A_log) softplus(a + dt_bias)        write strength, log decay (per value head)
    o = gated_delta_rule(q, k, v, g, beta)           engine/layers/delta_rule.py: chunked or token by token
    y = W_out (RMSNorm(o) * w * silu(z))             a gated RMSNorm over each head's dv (gain w shared)

A decode step keeps a fixed state per sequence: the convolution's last K-1 inputs (2 nk dk + nv dv channels)
and S [nv, dk, dv], whatever the context length. Below the module: the closed forms, from explicit
dimensions (`GDNDims`), each held against the module in tests/test_gdn.py; then the declared fields (`GDNKnobs`)
and the kind's registry entry (`GDNMixer`, engine/layers/mixers.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers import delta_rule
from engine.layers.attention import LayerKV
from engine.layers.init import init_linear
from engine.layers.kinds import LayerSpec, Mixer
from engine.layers.short_conv import causal_conv, conv_params
from engine.runtime import TORCH_DTYPES
from engine.validation import Knobs, declare

if TYPE_CHECKING:
    from engine.config import ModelConfig


@dataclass(frozen=True)
class GDNDims:
    d_model: int
    k_heads: int        # nk: query/key heads
    v_heads: int        # nv: value heads (a multiple of nk)
    k_dim: int          # dk
    v_dim: int          # dv
    conv_kernel: int    # K
    chunk: int          # tokens per chunk of the chunked form
    eps: float = 1e-6   # the gated RMSNorm's epsilon

    @property
    def key_width(self) -> int:
        return self.k_heads * self.k_dim

    @property
    def value_width(self) -> int:
        return self.v_heads * self.v_dim

    @property
    def conv_channels(self) -> int:
        """q, k and v pass through the convolution: 2 nk dk + nv dv."""
        return 2 * self.key_width + self.value_width

    @property
    def in_width(self) -> int:
        """Outputs of the input projections: q, k, v, z and the two per-head numbers b, a."""
        return self.conv_channels + self.value_width + 2 * self.v_heads


class GatedDeltaNet(nn.Module):
    """Qwen3.5's module layout: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, a depthwise conv1d, dt_bias, A_log,
    the gated norm's gain norm_weight, out_proj. state_dtype: what a decode cache keeps the recurrent state in
    (None: the activations' dtype)."""
    # roles of the parameters (engine/plan/tensors.py), named as llama.cpp names Qwen3.5's tensors
    ROLES = {"in_proj_qkv": ("ssm_in", "matrix"), "in_proj_z": ("ssm_z", "matrix"),
             "in_proj_b": ("ssm_beta", "matrix"), "in_proj_a": ("ssm_alpha", "matrix"), "conv1d": ("conv", "conv"),
             "dt_bias": ("ssm_dt_bias", "vector"), "A_log": ("ssm_a", "vector"), "norm_weight": ("ssm_norm", "norm"),
             "out_proj": ("ssm_out", "matrix")}

    def __init__(self, dims: GDNDims, state_dtype: torch.dtype | None = None):
        super().__init__()
        d, nv = dims.d_model, dims.v_heads
        self.dims, self.state_dtype = dims, state_dtype
        self.in_proj_qkv = nn.Linear(d, dims.conv_channels, bias=False)
        self.in_proj_z = nn.Linear(d, dims.value_width, bias=False)
        self.in_proj_b = nn.Linear(d, nv, bias=False)
        self.in_proj_a = nn.Linear(d, nv, bias=False)
        self.conv1d = nn.Conv1d(dims.conv_channels, dims.conv_channels, dims.conv_kernel, groups=dims.conv_channels,
                                bias=False)   # causal padding is short_conv's (K-1 zeros or the cached window)
        self.dt_bias = nn.Parameter(torch.empty(nv))
        self.A_log = nn.Parameter(torch.empty(nv))
        self.norm_weight = nn.Parameter(torch.empty(dims.v_dim))
        self.out_proj = nn.Linear(dims.value_width, d, bias=False)

    @torch.no_grad()
    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        """Projections N(0, std) (out: out_std); the conv as torch's Conv1d default, U(+-1/sqrt(K)); decay
        rates A uniform in [0.01, 16] (as transformers), dt_bias 1, the norm's gain 1."""
        for proj in (self.in_proj_qkv, self.in_proj_z, self.in_proj_b, self.in_proj_a):
            init_linear(proj, std, generator)
        bound = 1 / math.sqrt(self.dims.conv_kernel)
        self.conv1d.weight.uniform_(-bound, bound, generator=generator)
        self.A_log.copy_(torch.empty_like(self.A_log).uniform_(0.01, 16, generator=generator).log())
        self.dt_bias.fill_(1.0)
        self.norm_weight.fill_(1.0)
        init_linear(self.out_proj, out_std, generator)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None, rope: tuple | None = None,
                cache: LayerKV | None = None) -> torch.Tensor:
        """x [B, T, d] -> [B, T, d]; positions enter through the convolution and the recurrence, so pos and
        rope (a mixer's common arguments) are not read."""
        dims = self.dims
        B, T, _ = x.shape                                                       # x: [B, T, d_model]
        nk, nv, dk, dv = dims.k_heads, dims.v_heads, dims.k_dim, dims.v_dim
        z, b, a = self.in_proj_z(x), self.in_proj_b(x), self.in_proj_a(x)        # [B, T, nv dv], [B, T, nv] x2
        qkv = F.silu(causal_conv(self.in_proj_qkv(x), self.conv1d.weight, cache=cache))   # [B, T, C]
        q, k, v = qkv.split([dims.key_width, dims.key_width, dims.value_width], dim=-1)
        q = delta_rule.l2_normalize(q.reshape(B, T, nk, dk).float()) * dk ** -0.5
        k = delta_rule.l2_normalize(k.reshape(B, T, nk, dk).float())
        q, k = q.transpose(1, 2), k.transpose(1, 2)                             # [B, nk, T, dk]
        v = v.reshape(B, T, nv, dv).transpose(1, 2).float()                     # [B, nv, T, dv]
        beta = b.float().sigmoid().transpose(1, 2)                              # [B, nv, T]
        g = (-self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)).transpose(1, 2)
        state = None if cache is None or cache.recurrent is None else cache.recurrent.float()
        if cache is not None and T == 1:
            o, state = delta_rule.recurrent(q, k, v, g, beta, state)
        else:
            o, state = delta_rule.chunked_train(q, k, v, g, beta, dims.chunk, state, want_state=cache is not None)
        if cache is not None:
            cache.recurrent = state.to(self.state_dtype or x.dtype)
        o = F.rms_norm(o.to(x.dtype), (dv,), self.norm_weight, dims.eps)         # [B, T, nv, dv]
        o = o * F.silu(z.view(B, T, nv, dv))
        return self.out_proj(o.reshape(B, T, dims.value_width))                 # [B, T, d_model]


# ---- closed forms of one layer ------------------------------------------------------------------------------
def gdn_params(dims: GDNDims) -> dict[str, int]:
    """the input projections d (2 nk dk + 2 nv dv + 2 nv); conv (2 nk dk + nv dv) K; dt_bias, A_log nv each; the gated norm's
    gain dv; out_proj nv dv d. No biases (as in Qwen3-Next and Qwen3.5)."""
    return {"gdn_in_proj": dims.d_model * dims.in_width,
            "gdn_conv": conv_params(dims.conv_channels, dims.conv_kernel),
            "gdn_gates": 2 * dims.v_heads + dims.v_dim,
            "gdn_out_proj": dims.value_width * dims.d_model}


def gdn_matmul_params(dims: GDNDims) -> int:
    """Weights multiplied once per token (2 FLOPs each): both projections and the conv's K taps per channel."""
    p = gdn_params(dims)
    return p["gdn_in_proj"] + p["gdn_conv"] + p["gdn_out_proj"]


def gdn_core_flops(dims: GDNDims, batch: int, seq: int, initial: bool = False, final: bool = False) -> int:
    """The gated delta rule's products over all nv heads, chunked form (training, prefill)."""
    return batch * dims.v_heads * delta_rule.chunked_flops(seq, dims.chunk, dims.k_dim, dims.v_dim, initial, final)


def gdn_decode_flops(dims: GDNDims, batch: int) -> int:
    """One decode step's recurrent products: 6 nv dk dv per sequence (read, write, output), beyond the weights."""
    return batch * dims.v_heads * delta_rule.recurrent_flops(1, dims.k_dim, dims.v_dim)


def gdn_state_shapes(dims: GDNDims, conv_positions: int) -> dict[str, tuple[int, ...]]:
    """Per sequence: the conv window [C, positions] and the recurrent state [nv, dk, dv]."""
    return {"conv": (dims.conv_channels, conv_positions), "recurrent": (dims.v_heads, dims.k_dim, dims.v_dim)}


def gdn_saved_bytes(dims: GDNDims, B: int, T: int, e: int) -> dict[str, int]:
    """Bytes autograd keeps for backward in one layer, by term, excluding its input (the block's normed
    residual, which the input projections read): the padded conv input and the conv output (silu's input); q, k, v in fp32
    (in fp32 the silu output they are views of, else their fp32 copies: C channels either way); the rstd of
    each q and k head's L2 norm and the normalized q, k the rule keeps; the gates (sigmoid(b), a + dt_bias,
    its softplus, g, and two nv-wide copies of exp(A_log)); the rule keeps nothing more (it recomputes); the
    gated norm's fp32 input, rstd and fp32 normalized output, then its output, z, silu(z) and their product
    (out_proj's input) in the model dtype."""
    N, C, nk, nv = B * T, dims.conv_channels, dims.k_heads, dims.v_heads
    f32 = 4
    heads_out = N * dims.value_width
    return {"gdn_conv": B * C * (T + dims.conv_kernel - 1) * e + N * C * e,
            "gdn_qkv": N * C * f32 + 2 * N * nk * f32 + 2 * N * dims.key_width * f32,
            "gdn_gates": 4 * N * nv * f32 + 2 * nv * f32,
            "gdn_norm": 2 * heads_out * f32 + N * nv * f32 + 4 * heads_out * e}


# ---- declared fields and the registry entry -----------------------------------------------------------------
@dataclass(frozen=True)
class GDNKnobs(Knobs):
    """Gated DeltaNet layers (layer_types entries `gdn`), also KDA's (`kda`) and, for its chunk, lightning's;
    unused without them."""
    gdn_k_heads: int | None = declare(None, "gdn", "Gated DeltaNet and KDA: query/key heads nk (Qwen3-Next: 16, "
                                      "Kimi Linear: 32).", lo=1,
                                      null="n_heads")
    gdn_v_heads: int | None = declare(None, "gdn", "Gated DeltaNet and KDA: value heads nv, a multiple of nk; each "
                                      "has its own state S [dk, dv], decay and write strength (Qwen3-Next: 32).", lo=1,
                                      null="gdn_k_heads")
    gdn_k_dim: int | None = declare(None, "gdn", "Gated DeltaNet and KDA: width dk of each query/key head (128).",
                                    lo=1,
                                    null="the attention head width")
    gdn_v_dim: int | None = declare(None, "gdn", "Gated DeltaNet and KDA: width dv of each value head (128).",
                                    lo=1,
                                    null="gdn_k_dim")
    gdn_conv_kernel: int = declare(4, "gdn", "Gated DeltaNet and KDA: taps K of the short causal convolution "
                                   "over q, k and v; a decode cache keeps the last K-1 inputs.", lo=1)
    gdn_chunk: int = declare(64, "gdn", "Gated DeltaNet, KDA and lightning attention: tokens per chunk "
                             "of the chunked (training/prefill) form (MiniMax: block_size 256); changes the FLOPs, "
                             "not the result.", lo=1)

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        """Each key head serves a whole number of value heads (only when a layer is gdn)."""
        if not ok("layer_types", "gdn_k_heads", "gdn_v_heads", "n_heads") or not c.uses("gdn"):
            return []
        k_heads, v_heads = gdn_heads(c)
        if v_heads % k_heads:
            return [f"gdn_v_heads: {v_heads} is not a multiple of gdn_k_heads={k_heads}"]
        return []


def gdn_heads(cfg: ModelConfig) -> tuple[int, int]:
    """(key heads, value heads), nulls resolved: all the head rules read (not the widths, which need d_model)."""
    k_heads = cfg.gdn_k_heads or cfg.n_heads
    return k_heads, cfg.gdn_v_heads or k_heads


def gdn_dims(cfg: ModelConfig) -> GDNDims:
    """The config's Gated DeltaNet dimensions, nulls resolved (the gated norm takes norm_eps)."""
    k_heads, v_heads = gdn_heads(cfg)
    k_dim = cfg.gdn_k_dim or cfg.head_width
    return GDNDims(cfg.d_model, k_heads, v_heads, k_dim, cfg.gdn_v_dim or k_dim,
                   cfg.gdn_conv_kernel, cfg.gdn_chunk, cfg.norm_eps)


class GDNMixer(Mixer):
    name, label, words, attr = "gdn", "Gated DeltaNet", ("gdn",), "gdn"
    components = ("gdn_in_proj", "gdn_conv", "gdn_gates", "gdn_out_proj")
    recurrent = True
    transformers_state_dtype = "fp32"

    def summary(self, cfg):
        d = gdn_dims(cfg)
        return [self.label, f"q, k: {d.k_heads} heads x {d.k_dim}; v: {d.v_heads} heads x {d.v_dim}",
                f"conv {d.conv_kernel} taps over {d.conv_channels:,} channels, then SiLU",
                f"delta rule: a {d.k_dim}x{d.v_dim} state per value head", "gated RMSNorm, out_proj"]

    def build(self, cfg, spec):
        return GatedDeltaNet(gdn_dims(cfg), TORCH_DTYPES[cfg.state_dtype] if cfg.state_dtype else None)

    def params(self, cfg, spec):
        return gdn_params(gdn_dims(cfg))

    def matmul_params(self, cfg, spec):
        return gdn_matmul_params(gdn_dims(cfg))

    def forward_flops(self, cfg, spec, batch, seq, causal):
        return gdn_core_flops(gdn_dims(cfg), batch, seq)

    def backward_flops(self, cfg, spec, batch, seq, causal):
        dims = gdn_dims(cfg)
        return batch * dims.v_heads * delta_rule.chunked_backward_flops(seq, dims.chunk, dims.k_dim, dims.v_dim)

    def decode_flops(self, cfg, spec, batch, context):
        return gdn_decode_flops(gdn_dims(cfg), batch)

    def state_elements(self, cfg, conv_positions):
        dims = gdn_dims(cfg)
        shapes = gdn_state_shapes(dims, conv_positions(dims.conv_kernel))
        return {k: math.prod(v) for k, v in shapes.items()}

    def saved_bytes(self, cfg, spec: LayerSpec, B, T, e, impl, add):
        for term, n in gdn_saved_bytes(gdn_dims(cfg), B, T, e).items():
            add(term, n)
