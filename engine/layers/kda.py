"""Kimi Delta Attention (KDA; Kimi Linear, Moonshot AI 2025): Gated DeltaNet with a decay per key channel.

    q, k, v = x W_q, x W_k, x W_v                     q, k: nk heads of dk; v: nv heads of dv
    q, k, v = silu(causal_conv_K([q | k | v]))       a short depthwise convolution over the last K tokens
    q, k = l2norm(q) / sqrt(dk), l2norm(k)           each key head serves nv/nk value heads
    g = -exp(A_log) softplus(x W_fa W_fb + dt_bias)  log decay per value head AND key channel [nv, dk] (low rank)
    beta = sigmoid(x W_b)                            write strength, one per value head
    o = kda_rule(q, k, v, g, beta)                   engine/layers/kda_rule.py: chunked or token by token
    y = W_o (RMSNorm(o) * w * sigmoid(x W_ga W_gb))  a gated RMSNorm over each head's dv (gain w shared)

The two gates pass through a rank-dv bottleneck (f_a/f_b, g_a/g_b, as FLA's layer and transformers' Kimi Linear).
A decode step keeps a fixed state per sequence: the conv's last K-1 inputs (2 nk dk + nv dv channels) and
S [nv, dk, dv]. KDA shares Gated DeltaNet's sizes (gdn_k_heads ... gdn_chunk: one declaration per meaning) and
its dimensions object (`GDNDims`, engine/layers/gdn.py); below the module its closed forms, each held against the
module in tests/test_kda.py, and the kind's registry entry (`KDAMixer`, engine/layers/mixers.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers import delta_rule, kda_rule
from engine.layers.attention import LayerKV
from engine.layers.gdn import GDNDims, gdn_dims, gdn_heads, gdn_state_shapes
from engine.layers.init import init_linear
from engine.layers.kinds import Mixer
from engine.layers.short_conv import causal_conv, conv_params
from engine.runtime import TORCH_DTYPES
from engine.validation import Knobs

if TYPE_CHECKING:
    from engine.config import ModelConfig


class KimiDeltaAttention(nn.Module):
    """transformers' KimiLinearDeltaAttention layout (q_proj, k_proj, v_proj, a depthwise conv1d over [q | k | v],
    the forget gate's f_a_proj, f_b_proj, dt_bias [nv dk], A_log [nv], b_proj, the output gate's g_a_proj,
    g_b_proj, the gated norm's gain norm_weight, o_proj). state_dtype: what a decode cache keeps S in."""
    # roles of the parameters (engine/plan/tensors.py), named as llama.cpp names Kimi Linear's tensors
    ROLES = {"q_proj": ("kda_q", "matrix"), "k_proj": ("kda_k", "matrix"), "v_proj": ("kda_v", "matrix"),
             "conv1d": ("conv", "conv"), "f_a_proj": ("ssm_f_a", "matrix"), "f_b_proj": ("ssm_f_b", "matrix"),
             "dt_bias": ("ssm_dt_bias", "vector"), "A_log": ("ssm_a", "vector"), "b_proj": ("ssm_beta", "matrix"),
             "g_a_proj": ("ssm_g_a", "matrix"), "g_b_proj": ("ssm_g_b", "matrix"), "norm_weight": ("ssm_norm", "norm"),
             "o_proj": ("kda_o", "matrix")}

    def __init__(self, dims: GDNDims, state_dtype: torch.dtype = torch.float32):
        super().__init__()
        d, nv, dk, dv = dims.d_model, dims.v_heads, dims.k_dim, dims.v_dim
        self.dims, self.state_dtype = dims, state_dtype
        self.q_proj = nn.Linear(d, dims.key_width, bias=False)
        self.k_proj = nn.Linear(d, dims.key_width, bias=False)
        self.v_proj = nn.Linear(d, dims.value_width, bias=False)
        self.conv1d = nn.Conv1d(dims.conv_channels, dims.conv_channels, dims.conv_kernel, groups=dims.conv_channels,
                                bias=False)   # causal padding is short_conv's (K-1 zeros or the cached window)
        self.f_a_proj = nn.Linear(d, dv, bias=False)
        self.f_b_proj = nn.Linear(dv, nv * dk, bias=False)
        self.dt_bias = nn.Parameter(torch.empty(nv * dk))
        self.A_log = nn.Parameter(torch.empty(nv))
        self.b_proj = nn.Linear(d, nv, bias=False)
        self.g_a_proj = nn.Linear(d, dv, bias=False)
        self.g_b_proj = nn.Linear(dv, dims.value_width, bias=False)
        self.norm_weight = nn.Parameter(torch.empty(dv))
        self.o_proj = nn.Linear(dims.value_width, d, bias=False)

    @torch.no_grad()
    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        """Projections N(0, std) (out: out_std); the conv U(+-1/sqrt(K)); as FLA and transformers: A uniform in
        [1, 16], dt = softplus(dt_bias) log-uniform in [1e-3, 1e-1]; the norm's gain 1."""
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.f_a_proj, self.f_b_proj, self.b_proj,
                     self.g_a_proj, self.g_b_proj):
            init_linear(proj, std, generator)
        bound = 1 / math.sqrt(self.dims.conv_kernel)
        self.conv1d.weight.uniform_(-bound, bound, generator=generator)
        self.A_log.copy_(torch.empty_like(self.A_log).uniform_(1, 16, generator=generator).log())
        dt = torch.empty_like(self.dt_bias).uniform_(math.log(1e-3), math.log(1e-1), generator=generator).exp()
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))     # the inverse of softplus
        self.norm_weight.fill_(1.0)
        init_linear(self.o_proj, out_std, generator)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None, rope: tuple | None = None,
                cache: LayerKV | None = None) -> torch.Tensor:
        """x [B, T, d] -> [B, T, d]; positions enter through the convolution and the decays (pos, rope unread)."""
        dims = self.dims
        B, T, _ = x.shape                                                       # x: [B, T, d_model]
        nk, nv, dk, dv = dims.k_heads, dims.v_heads, dims.k_dim, dims.v_dim
        qkv = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)   # [B, T, C]
        q, k, v = F.silu(causal_conv(qkv, self.conv1d.weight, cache=cache)).split(
            [dims.key_width, dims.key_width, dims.value_width], dim=-1)
        q = delta_rule.l2_normalize(q.reshape(B, T, nk, dk).float()) * dk ** -0.5
        k = delta_rule.l2_normalize(k.reshape(B, T, nk, dk).float())
        q, k = q.transpose(1, 2), k.transpose(1, 2)                             # [B, nk, T, dk]
        v = v.reshape(B, T, nv, dv).transpose(1, 2).float()                     # [B, nv, T, dv]
        decay = F.softplus(self.f_b_proj(self.f_a_proj(x)).float() + self.dt_bias.float())
        g = (-self.A_log.float().exp()[:, None] * decay.view(B, T, nv, dk)).transpose(1, 2)   # [B, nv, T, dk]
        beta = self.b_proj(x).float().sigmoid().transpose(1, 2)                 # [B, nv, T]
        state = None if cache is None or cache.recurrent is None else cache.recurrent.float()
        if cache is not None and T == 1:
            o, state = delta_rule.recurrent(q, k, v, g, beta, state)
        else:
            o, state = delta_rule.chunked_train(q, k, v, g, beta, dims.chunk, state, want_state=cache is not None,
                                                rule=kda_rule.chunked)
        if cache is not None:
            cache.recurrent = state.to(self.state_dtype)
        gate = self.g_b_proj(self.g_a_proj(x)).view(B, T, nv, dv)
        o = F.rms_norm(o.to(x.dtype).float(), (dv,), self.norm_weight.float(), dims.eps) * gate.float().sigmoid()
        return self.o_proj(o.to(x.dtype).reshape(B, T, dims.value_width))      # [B, T, d_model]


# ---- closed forms of one layer ------------------------------------------------------------------------------
def kda_params(dims: GDNDims) -> dict[str, int]:
    """q, k, v and b: d (2 nk dk + nv dv + nv); conv (2 nk dk + nv dv) K; the gates: f_a, g_a d dv, f_b dv nv dk,
    g_b dv nv dv, dt_bias nv dk, A_log nv, the gated norm's gain dv; o_proj nv dv d. No biases (as Kimi Linear)."""
    d, nv, dk, dv = dims.d_model, dims.v_heads, dims.k_dim, dims.v_dim
    return {"kda_in_proj": d * (dims.conv_channels + nv),
            "kda_conv": conv_params(dims.conv_channels, dims.conv_kernel),
            "kda_gates": 2 * d * dv + dv * nv * dk + dv * dims.value_width + nv * dk + nv + dv,
            "kda_out_proj": dims.value_width * d}


def kda_matmul_params(dims: GDNDims) -> int:
    """Weights multiplied once per token (2 FLOPs each): the projections, the conv's K taps per channel and the
    four low-rank gate matrices (not dt_bias, A_log or the norm's gain)."""
    p = kda_params(dims)
    nv, dk, dv = dims.v_heads, dims.k_dim, dims.v_dim
    return p["kda_in_proj"] + p["kda_conv"] + p["kda_gates"] - (nv * dk + nv + dv) + p["kda_out_proj"]


def kda_core_flops(dims: GDNDims, batch: int, seq: int) -> int:
    """The KDA rule's products over all nv heads, chunked form (training, prefill)."""
    return batch * dims.v_heads * kda_rule.chunked_flops(seq, dims.chunk, dims.k_dim, dims.v_dim)


def kda_saved_bytes(dims: GDNDims, B: int, T: int, e: int) -> dict[str, int]:
    """Bytes autograd keeps for backward in one layer, by term, excluding its input (the block's normed residual,
    which every input projection reads): the concatenated projections padded for the conv and the conv output
    (silu's input); q, k, v in fp32 (the silu output they are views of in fp32, else fp32 copies: C channels);
    the rstd of each q and k head's L2 norm and the normalized q, k the rule keeps; the forget gate's rank-dv
    activation, its fp32 softplus input and output, exp(A_log) and its negation [nv] and the product g
    [nv, dk] the rule keeps; sigmoid(b); the rule keeps nothing more (it recomputes); the output gate's rank-dv
    activation; the gated norm's fp32 input, normalized x, rstd, output and sigmoid(gate), outside fp32 its gain's
    fp32 copy, and o_proj's input (in the model dtype)."""
    N, C, nk, nv, dk, dv = B * T, dims.conv_channels, dims.k_heads, dims.v_heads, dims.k_dim, dims.v_dim
    f32 = 4
    heads_out = N * dims.value_width
    return {"kda_conv": B * C * (T + dims.conv_kernel - 1) * e + N * C * e,
            "kda_qkv": N * C * f32 + 2 * N * nk * f32 + 2 * N * dims.key_width * f32,
            "kda_gates": 2 * N * dv * e + 3 * N * nv * dk * f32 + 2 * nv * f32 + N * nv * f32,
            "kda_norm": 4 * heads_out * f32 + N * nv * f32 + (dv * f32 if e != f32 else 0) + heads_out * e}


# ---- declared fields and the registry entry -----------------------------------------------------------------
@dataclass(frozen=True)
class KDAKnobs(Knobs):
    """KDA layers (layer_types entries `kda`) take Gated DeltaNet's sizes (gdn_k_heads, gdn_v_heads, gdn_k_dim,
    gdn_v_dim, gdn_conv_kernel, gdn_chunk): no fields of their own."""

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        """Each key head serves a whole number of value heads (Gated DeltaNet's rule says so when a layer is gdn)."""
        if not ok("layer_types", "gdn_k_heads", "gdn_v_heads", "n_heads") or not c.uses("kda") or c.uses("gdn"):
            return []
        k_heads, v_heads = gdn_heads(c)
        if v_heads % k_heads:
            return [f"gdn_v_heads: {v_heads} is not a multiple of gdn_k_heads={k_heads} (KDA layers)"]
        return []


class KDAMixer(Mixer):
    name, label, words, attr = "kda", "Kimi Delta Attention", ("kda",), "kda"
    components = ("kda_in_proj", "kda_conv", "kda_gates", "kda_out_proj")
    recurrent = True
    transformers_state_dtype = "fp32"

    def summary(self, cfg):
        d = gdn_dims(cfg)
        return [self.label, f"q, k: {d.k_heads} heads x {d.k_dim}; v: {d.v_heads} heads x {d.v_dim}",
                f"conv {d.conv_kernel} taps over {d.conv_channels:,} channels, then SiLU",
                f"delta rule, a decay per key channel: a {d.k_dim}x{d.v_dim} state per value head",
                "sigmoid-gated RMSNorm, o_proj"]

    def build(self, cfg, spec):
        return KimiDeltaAttention(gdn_dims(cfg), TORCH_DTYPES[self.state_dtype(cfg)])

    def params(self, cfg, spec):
        return kda_params(gdn_dims(cfg))

    def matmul_params(self, cfg, spec):
        return kda_matmul_params(gdn_dims(cfg))

    def forward_flops(self, cfg, spec, batch, seq, causal):
        return kda_core_flops(gdn_dims(cfg), batch, seq)

    def backward_flops(self, cfg, spec, batch, seq, causal):
        dims = gdn_dims(cfg)
        return batch * dims.v_heads * kda_rule.chunked_backward_flops(seq, dims.chunk, dims.k_dim, dims.v_dim)

    def decode_flops(self, cfg, spec, batch, context):
        """6 nv dk dv per sequence (read, write, output), as Gated DeltaNet's: delta_rule.recurrent_flops."""
        dims = gdn_dims(cfg)
        return batch * dims.v_heads * delta_rule.recurrent_flops(1, dims.k_dim, dims.v_dim)

    def state_elements(self, cfg, conv_positions):
        dims = gdn_dims(cfg)
        return {k: math.prod(v) for k, v in gdn_state_shapes(dims, conv_positions(dims.conv_kernel)).items()}

    def state_dtype(self, cfg):
        """vLLM keeps KDA's recurrent state in fp32 whatever the cache dtypes say (MambaStateDtypeCalculator
        .kda_state_dtype); this engine's cache does the same."""
        return "fp32"

    def saved_bytes(self, cfg, spec, B, T, e, impl, add):
        for term, n in kda_saved_bytes(gdn_dims(cfg), B, T, e).items():
            add(term, n)
