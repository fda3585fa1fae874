"""Lightning attention (MiniMax-01, 2025): linear attention with a fixed decay per head, blockwise for training.

    q, k, v = silu(x W_qkv)                        H heads of dh each: the attention's n_heads and head width
    S_t = lam S_{t-1} + k_t^T v_t;  o_t = q_t S_t   S [dh, dh] per head; lam = exp(-s_h), fixed
    y = W_out (sigmoid(x W_gate) * RMSNorm(o))     one RMSNorm over all H dh channels (eps 1e-6, as MiniMax)

No softmax, no normalizer and no scaling of q: the decay alone keeps S bounded. The rate of head h in layer l of L
is ALiBi's slope times a factor falling with depth (MiniMax's get_slope_rate):

    s_h = r^(h+1) (1 - l / (L - 1 + 1e-5) + 1e-5),   r = 2^(-8/H)

so early layers forget fast and the last one hardly at all; the module keeps its rates in the buffer `slope`
(the kind is registered per_layer: its LayerSpec carries the layer index). The chunked form (training, prefill)
runs c = gdn_chunk tokens at a time (MiniMax's block_size):

    O = (Q K^T * D) V + (Q * lam^(i+1)) S0;   S <- lam^c S0 + (K * lam^(c-1-j))^T V,   D_ij = lam^(i-j), j <= i

and the recurrent form one token at a time (decode); both compute in fp32 (transformers' fallback computes in
the model's dtype) and are held equal to each other and to transformers' MiniMaxLightningAttention in
tests/test_lightning.py. Training keeps only q, k, v for backward and recomputes the blocks there
(delta_rule.chunked_train), as it does for Gated DeltaNet. A decode step keeps S [H, dh, dh] per sequence and no
convolution window.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers import delta_rule
from engine.layers.attention import LayerKV
from engine.layers.init import init_linear
from engine.layers.kinds import Mixer
from engine.runtime import TORCH_DTYPES

Tensor = torch.Tensor
NORM_EPS = 1e-6   # MiniMaxLightningAttention's norm is built without rms_norm_eps: its default, 1e-6


@dataclass(frozen=True)
class LightningDims:
    d_model: int
    heads: int        # H
    head_dim: int     # dh: q, k and v alike
    chunk: int        # tokens per block of the chunked form
    layer: int = 0    # l, 0-based, and L: the decay rates fall with depth
    n_layers: int = 1

    @property
    def width(self) -> int:
        return self.heads * self.head_dim


def slope_rates(heads: int, layer: int, n_layers: int) -> Tensor:
    """s_h for h = 0 .. H-1, in fp32, computed as MiniMax's get_slope_rate computes it."""
    base = 1 / (2 ** (8 / heads))
    return base ** torch.arange(1, heads + 1) * (1 - layer / (n_layers - 1 + 1e-5) + 1e-5)


def chunked(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: None, chunk: int, state: Tensor | None = None,
            want_state: bool = False) -> tuple[Tensor, Tensor | None]:
    """q, k [B, H, T, dk], v [B, H, T, dv], g [H] the log decay per head (-s), beta unused (the signature of
    delta_rule.chunked_train's rules), state [B, H, dk, dv] or None -> (o [B, T, H, dv], the final state or None).
    Blocks of `chunk` tokens, the last one shorter when T is not a multiple."""
    T = v.shape[2]
    c = delta_rule.chunk_size(T, chunk)
    rate = -g.reshape(-1, 1, 1)                                       # [H, 1, 1]
    outs = []
    for start in range(0, T, c):
        n = min(start + c, T) - start
        i = torch.arange(n, device=v.device, dtype=rate.dtype)
        qs, ks, vs = q[:, :, start:start + n], k[:, :, start:start + n], v[:, :, start:start + n]
        later = torch.ones(n, n, dtype=torch.bool, device=v.device).triu(1)
        decay = (-rate * (i[:, None] - i[None, :])).masked_fill(later, -math.inf).exp()   # [H, n, n]
        o = ((qs @ ks.transpose(-1, -2)) * decay) @ vs
        if state is not None:   # the state before the block, decayed i + 1 steps
            o = o + (qs * (-rate * (i + 1)[:, None]).exp()) @ state
        outs.append(o)
        if start + n < T or want_state:
            write = (ks * (-rate * (n - 1 - i)[:, None]).exp()).transpose(-1, -2) @ vs
            state = write if state is None else state * (-rate * n).exp() + write
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), (state if want_state else None)


def recurrent(q: Tensor, k: Tensor, v: Tensor, g: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The same token by token (decode); shapes as `chunked`; always returns the final state."""
    B, H, T, dv = v.shape
    if state is None:
        state = torch.zeros(B, H, k.shape[-1], dv, dtype=v.dtype, device=v.device)
    lam = g.exp().reshape(-1, 1, 1)
    outs = []
    for t in range(T):
        state = lam * state + k[:, :, t, :, None] @ v[:, :, t, None, :]      # the outer product k_t^T v_t
        outs.append(q[:, :, t, None, :] @ state)
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), state


class LightningAttention(nn.Module):
    """MiniMax's layout: qkv_proj (per head [q | k | v]), output_gate, the norm's gain norm_weight [H dh],
    out_proj, and the decay rates `slope` [H] (a buffer: fixed, not trained). state_dtype: what a decode cache
    keeps S in (None: the activations' dtype)."""
    ROLES = {"qkv_proj": ("ssm_in", "matrix"), "output_gate": ("ssm_z", "matrix"), "norm_weight": ("ssm_norm", "norm"),
             "out_proj": ("ssm_out", "matrix")}   # roles of the parameters (engine/plan/tensors.py)

    def __init__(self, dims: LightningDims, state_dtype: torch.dtype | None = None):
        super().__init__()
        d, w = dims.d_model, dims.width
        self.dims, self.state_dtype = dims, state_dtype
        self.qkv_proj = nn.Linear(d, 3 * w, bias=False)
        self.output_gate = nn.Linear(d, w, bias=False)
        self.norm_weight = nn.Parameter(torch.empty(w))
        self.out_proj = nn.Linear(w, d, bias=False)
        self.slope = nn.Buffer(torch.empty(dims.heads))

    @torch.no_grad()
    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        """Projections N(0, std) (out: out_std), the norm's gain 1, the rates of this layer's depth."""
        init_linear(self.qkv_proj, std, generator)
        init_linear(self.output_gate, std, generator)
        self.norm_weight.fill_(1.0)
        init_linear(self.out_proj, out_std, generator)
        self.slope.copy_(slope_rates(self.dims.heads, self.dims.layer, self.dims.n_layers))

    def forward(self, x: Tensor, pos: Tensor | None = None, rope: tuple | None = None,
                cache: LayerKV | None = None) -> Tensor:
        """x [B, T, d] -> [B, T, d]; positions enter through the decay (pos and rope are not read)."""
        dims = self.dims
        B, T, _ = x.shape                                                       # x: [B, T, d_model]
        qkv = F.silu(self.qkv_proj(x)).view(B, T, dims.heads, 3 * dims.head_dim).float()
        q, k, v = (t.transpose(1, 2) for t in qkv.split(dims.head_dim, dim=-1))   # [B, H, T, dh] each
        g = -self.slope.float()
        state = None if cache is None or cache.recurrent is None else cache.recurrent.float()
        if cache is not None and T == 1:
            o, state = recurrent(q, k, v, g, state)
        else:
            o, state = delta_rule.chunked_train(q, k, v, g, None, dims.chunk, state, want_state=cache is not None,
                                                rule=chunked)
        if cache is not None:
            cache.recurrent = state.to(self.state_dtype or x.dtype)
        o = F.rms_norm(o.reshape(B, T, dims.width).to(x.dtype), (dims.width,), self.norm_weight, NORM_EPS)
        return self.out_proj(self.output_gate(x).sigmoid() * o)                # [B, T, d_model]


# ---- closed forms of one layer ------------------------------------------------------------------------------
def lightning_params(dims: LightningDims) -> dict[str, int]:
    """qkv_proj d 3 H dh and output_gate d H dh; the norm's gain H dh; out_proj H dh d. No biases (MiniMax)."""
    return {"lightning_in_proj": 4 * dims.d_model * dims.width, "lightning_norm": dims.width,
            "lightning_out_proj": dims.width * dims.d_model}


def lightning_matmul_params(dims: LightningDims) -> int:
    """Weights multiplied once per token (2 FLOPs each): the three projections."""
    return 5 * dims.d_model * dims.width


def block_flops(seq: int, chunk: int, dk: int, dv: int, initial: bool = False, final: bool = False) -> int:
    """FLOPs of `chunked` for one head of one sequence: per block of n tokens Q K^T (2 n^2 dk) and its product
    with V (2 n^2 dv); 2 n dk dv to read the state (when there is one) and 2 n dk dv to write the next (when it
    is needed)."""
    c = delta_rule.chunk_size(seq, chunk)
    sizes = [min(c, seq - start) for start in range(0, seq, c)]
    total = sum(2 * n * n * (dk + dv) for n in sizes)
    reads = sizes if initial else sizes[1:]
    writes = sizes if final else sizes[:-1]
    return total + sum(2 * n * dk * dv for n in reads + writes)


def lightning_core_flops(dims: LightningDims, batch: int, seq: int) -> int:
    return batch * dims.heads * block_flops(seq, dims.chunk, dims.head_dim, dims.head_dim)


def lightning_saved_bytes(dims: LightningDims, B: int, T: int, e: int) -> dict[str, int]:
    """Bytes autograd keeps for backward in one layer, by term, excluding its input (which qkv_proj and
    output_gate read): silu's input and, in fp32, q, k, v (the silu output, or outside fp32 its fp32 copy) and the
    log decays -s [H] the recompute keeps; the norm's fp32 input (RMSNorm computes in fp32), rstd and normalized
    x, its output and the sigmoid of the gate, and out_proj's input."""
    N, w, f32 = B * T, dims.width, 4
    return {"lightning_qkv": 3 * N * w * e + 3 * N * w * f32 + dims.heads * f32,
            "lightning_norm": 2 * N * w * f32 + N * f32 + 2 * N * w * e,
            "lightning_out": N * w * e}


def lightning_dims(cfg, layer: int | None = None) -> LightningDims:
    """The config's lightning dimensions: the attention's heads and head width, gdn_chunk tokens per block."""
    return LightningDims(cfg.d_model, cfg.n_heads, cfg.head_width, cfg.gdn_chunk, layer or 0, cfg.n_layers)


class LightningMixer(Mixer):
    name, label, words, attr = "lightning", "lightning attention", ("lightning",), "lightning"
    components = ("lightning_in_proj", "lightning_norm", "lightning_out_proj")
    recurrent, per_layer = True, True

    def summary(self, cfg):
        d = lightning_dims(cfg)
        return [self.label, f"q, k, v: {d.heads} heads x {d.head_dim}, SiLU",
                f"linear attention, a fixed decay per head and layer: a {d.head_dim}x{d.head_dim} state per head",
                f"blocks of {d.chunk} tokens in training", "RMSNorm, sigmoid output gate, out_proj"]

    def build(self, cfg, spec):
        state = self.state_dtype(cfg)
        return LightningAttention(lightning_dims(cfg, spec.layer), TORCH_DTYPES[state] if state else None)

    def params(self, cfg, spec):
        return lightning_params(lightning_dims(cfg))

    def matmul_params(self, cfg, spec):
        return lightning_matmul_params(lightning_dims(cfg))

    def forward_flops(self, cfg, spec, batch, seq, causal):
        return lightning_core_flops(lightning_dims(cfg), batch, seq)

    def backward_flops(self, cfg, spec, batch, seq, causal):
        """The recompute (one forward), then both operands' gradients of every product."""
        return 3 * self.forward_flops(cfg, spec, batch, seq, causal)

    def decode_flops(self, cfg, spec, batch, context):
        """4 H dh^2 per sequence: the write k^T v and the read q S (the decay is elementwise)."""
        d = lightning_dims(cfg)
        return batch * d.heads * 4 * d.head_dim * d.head_dim

    def state_elements(self, cfg, conv_positions):
        d = lightning_dims(cfg)
        return {"recurrent": d.heads * d.head_dim * d.head_dim}

    def saved_bytes(self, cfg, spec, B, T, e, impl, add):
        for term, n in lightning_saved_bytes(lightning_dims(cfg), B, T, e).items():
            add(term, n)
