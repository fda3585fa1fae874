"""Causal self-attention: MHA/GQA/MQA, head_dim independent of d_model, sliding window, QK-norm, soft-capping,
attention sinks.
(This file is longer than 300 lines: the family's declared fields, its module and its closed forms stay in one place.)

Two paths compute the same thing: PyTorch's fused scaled_dot_product_attention, and an explicit
softmax(QK^T/sqrt(d)) V that also handles soft-capping (cap the scores, then mask) and sinks, and can keep the
attention probabilities for plots. A sink (gpt-oss) is one learned logit s_h per head, softmaxed with the
scores as an extra key that has no value: p_j = exp(z_j) / (exp(s_h) + sum_k exp(z_k)). SDPA has no such
term (and its log-sum-exp, which would allow a correction, carries no gradient), so sinks take the explicit
path, as transformers runs gpt-oss eagerly. Below the module: the family's closed forms (parameters, matrix weights,
score FLOPs, KV-cache bytes, bytes saved for backward), each matching the module above.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.init import init_linear, init_norm
from engine.layers.norm import STAT, make_norm, norm_params, norm_saved_bytes
from engine.layers.position import alibi_bias, apply_rope, query_temperature, rope_layer_bytes
from engine.layers.span import Chunk, Span, keys_held, visible
from engine.validation import Knobs, declare

if TYPE_CHECKING:   # engine.config assembles ModelConfig from this module's knobs
    from engine.config import ModelConfig


# ---- declared fields (engine/config.py assembles every family's into ModelConfig) ----------------------------
@dataclass(frozen=True)
class AttentionKnobs(Knobs):
    """Attention fields and their derived widths and windows."""
    n_heads: int = declare(12, "attention", "Number of query heads in every attention layer.", lo=1)
    n_kv_heads: int | None = declare(None, "attention", "Key/value heads shared by groups of query heads: "
                                      "equal to n_heads is MHA, 1 is MQA, in between is GQA.", lo=1,
                                      null="same as n_heads (MHA)")
    head_dim: int | None = declare(None, "attention", "Width of each head; heads times head_dim may differ from "
                                    "d_model.", lo=1, null="d_model // n_heads")
    attn_window: int | None = declare(None, "attention", "Sliding window: a query sees only keys within the last "
                                       "this-many positions, itself included.", lo=1, null="full causal attention")
    global_every: int | None = declare(None, "attention", "With a window, every k-th layer (k, 2k, ... counting "
                                        "from 1) still uses full attention; ignored without a window or with "
                                        "layer_types.", lo=1, null="every layer uses the window")
    qk_norm: bool = declare(False, "attention", "Normalize each head's queries and keys before the dot product.")
    # the score scale (Gemma-2/3, real configs of today); which layers slide is layer_types (engine/layers/mixers.py)
    attn_chunk: int | None = declare(None, "attention", "Chunked local attention (Llama 4): on layers marked chunked "
                                      "a query sees only the earlier keys of its own block of this many positions; "
                                      "ignored without chunked layers.", lo=1, null="no chunked layers")
    attn_scale: float | None = declare(None, "attention", "Multiplier of q.k before the softmax (Gemma: "
                                        "query_pre_attn_scalar^-0.5).", lo=0, lo_open=True, null="1/sqrt(head_dim)")
    attn_softcap: float | None = declare(None, "attention", "Squash attention scores smoothly into (-c, c) with "
                                          "c*tanh(s/c), before the causal mask.", lo=0, lo_open=True, null="no cap")
    qkv_bias: bool = declare(False, "attention", "Biases on the query, key and value projections only (Qwen2).")
    attn_sinks: bool = declare(False, "attention", "A learned logit per head joins the softmax as one more key that "
                                "takes probability but adds no value, so a head can attend to nothing (gpt-oss).")
    qk_norm_scope: str = declare("head", "attention", "With qk_norm: one gain per head dimension shared by all "
                                  "heads (Qwen3), one norm over all heads at once (OLMoE), or each head normalized "
                                  "without a gain and only in layers that rotate (Llama 4's L2 norm, with rmsnorm).",
                                  choices=("head", "all_heads", "rope_heads"))
    attn_gate: str | None = declare(None, "attention", "An output gate: the heads' output times sigmoid(x W_g) "
                                    "before o_proj, one gate per dimension (elementwise: Qwen3-Next, Qwen3.5) or "
                                    "per head (Qiu et al. 2025, gated attention).", choices=("elementwise", "head"),
                                    null="no gate")
    attn_out_scale: float = declare(1.0, "attention", "The attention output (after o_proj) is scaled by this before "
                                    "the residual add (Falcon-H1: attention_in x attention_out multipliers; Granite "
                                    "residual_multiplier).", lo=0, lo_open=True)

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_width(self) -> int:
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def attn_width(self) -> int:
        """A = n_heads * head_width: the width of the concatenated heads (may differ from d_model)."""
        return self.n_heads * self.head_width

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_width

    def layer_window(self, i: int) -> Span:
        """Layer i's (0-based) span (engine/layers/span.py): a sliding window, a Chunk, or None for full attention
        (constant time: the budgets ask per layer, and 100,000 layers must not cost 100,000 lists)."""
        if self.layer_types is not None:   # explicit kinds win over global_every (engine/layers/mixers.py)
            words = self.layer_types[i].split("+")
            if "chunked" in words:
                return Chunk(self.attn_chunk) if self.attn_chunk is not None else None
            return self.attn_window if "sliding" in words else None
        if self.attn_window is None:
            return None
        k = self.global_every
        return None if k and (i + 1) % k == 0 else self.attn_window

    @property
    def layer_windows(self) -> list[Span]:
        """Per layer (0-based list): the span, a sliding window, a Chunk or None for full attention."""
        return [self.layer_window(i) for i in range(self.n_layers)]

    @property
    def attention_kind(self) -> str:
        if self.mla:
            return "MLA"
        return "MHA" if self.kv_heads == self.n_heads else "MQA" if self.kv_heads == 1 else f"GQA-{self.kv_heads}"

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        """Head counts that must divide, a head width that must not be 0, an output gate where it is modelled."""
        out = []
        if ok("n_heads", "n_kv_heads") and c.n_kv_heads is not None and c.n_heads % c.n_kv_heads:
            out.append(f"n_kv_heads: {c.n_kv_heads} does not divide n_heads={c.n_heads}")
        if ok("head_dim", "d_model", "n_heads") and c.head_dim is None and c.d_model < c.n_heads:
            out.append(f"head_dim: d_model={c.d_model} // n_heads={c.n_heads} is 0; set head_dim or use fewer heads")
        if ok("attn_gate", "kv_lora_rank") and c.attn_gate is not None and c.mla:
            out.append("attn_gate: the output gate is not modelled with MLA (kv_lora_rank set); set attn_gate: null")
        if (ok("layer_types", "attn_chunk") and c.layer_types and c.attn_chunk is None
                and any("chunked" in w.split("+") for w in c.layer_types)):
            out.append("layer_types: chunked layers need a chunk size; set attn_chunk")
        return out


class LayerKV:
    """One layer's decode cache. Attention: keys and values [B, kv_heads, S, hd] and the absolute position of
    the first key (a sliding-window layer keeps only the last `window` positions, so its cache really is
    smaller); a sparse-attention (DSA) layer also its indexer's keys, in `index_format` (engine/layers/
    indexer.py). A recurrent mixer (engine/layers/mixers.py): its fixed state, the short convolution's last
    inputs `conv` [B, C, K-1] and the recurrent `recurrent` tensor, whatever the context length."""

    def __init__(self, index_format: str) -> None:   # KVCache passes its own index_keys
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.start = 0
        self.index_format = index_format
        self.index_keys: torch.Tensor | None = None     # [B, S, D], FP8 or the model's dtype
        self.index_scales: torch.Tensor | None = None   # [B, S, blocks] fp32 beside FP8 keys
        self.conv: torch.Tensor | None = None
        self.recurrent: torch.Tensor | None = None

    @staticmethod
    def _bytes(*tensors: torch.Tensor | None) -> int:
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    def kv_nbytes(self) -> int:
        """What grows with the context: keys and values (or MLA's latent) and the indexer keys."""
        return self._bytes(self.k, self.v) + self.index_nbytes()

    def index_nbytes(self) -> int:
        """The indexer keys (and their scales) alone."""
        return self._bytes(self.index_keys, self.index_scales)

    def state_nbytes(self) -> int:
        return self._bytes(self.conv, self.recurrent)

    def nbytes(self) -> int:
        return self.kv_nbytes() + self.state_nbytes()


class Attention(nn.Module):
    # roles of the parameters (engine/plan/tensors.py); g: the output gate, packed with the query heads
    ROLES = {"q_proj": ("q", "matrix"), "k_proj": ("k", "matrix"), "v_proj": ("v", "matrix"),
             "o_proj": ("o", "matrix"), "g_proj": ("g", "matrix"), "q_norm": ("norm", "norm"),
             "k_norm": ("norm", "norm"),
             "sinks": ("sinks", "vector")}

    def __init__(self, cfg: ModelConfig, window: Span, temperature: bool = False):
        super().__init__()
        self.n_heads, self.kv_heads, self.hd = cfg.n_heads, cfg.kv_heads, cfg.head_width
        self.window, self.softcap, self.dropout = window, cfg.attn_softcap, cfg.dropout
        self.alibi = cfg.position == "alibi"
        self.scale = cfg.attn_scale   # None: 1/sqrt(head_dim)
        qkv_bias = cfg.bias or cfg.qkv_bias
        self.q_proj = nn.Linear(cfg.d_model, cfg.attn_width, bias=qkv_bias)
        self.k_proj = nn.Linear(cfg.d_model, cfg.kv_width, bias=qkv_bias)
        self.v_proj = nn.Linear(cfg.d_model, cfg.kv_width, bias=qkv_bias)
        self.o_proj = nn.Linear(cfg.attn_width, cfg.d_model, bias=cfg.bias)
        self.gate = cfg.attn_gate   # None, "elementwise" (one gate per output dimension) or "head"
        self.out_scale = cfg.attn_out_scale
        gates = cfg.attn_width if cfg.attn_gate == "elementwise" else cfg.n_heads
        self.g_proj = nn.Linear(cfg.d_model, gates, bias=qkv_bias) if cfg.attn_gate else None
        # all_heads (OLMoE): one norm over the whole projection, before it is split into heads
        # rope_heads (Llama 4): per head, no gain, and only when the layer rotates (a rotation keeps each head's
        # RMS, so normalizing before RoPE, as here, equals Llama 4's normalizing after it)
        self.qk_all = cfg.qk_norm and cfg.qk_norm_scope == "all_heads"
        self.qk_rope_only = cfg.qk_norm_scope == "rope_heads"
        gain = None if not self.qk_rope_only else False
        self.q_norm = make_norm(cfg, cfg.attn_width if self.qk_all else self.hd, gain) if cfg.qk_norm else None
        self.k_norm = make_norm(cfg, cfg.kv_width if self.qk_all else self.hd, gain) if cfg.qk_norm else None
        self.temperature = cfg if temperature else None   # long-context query temperature on this layer
        self.sinks = nn.Parameter(torch.empty(cfg.n_heads)) if cfg.attn_sinks else None   # one logit per head
        self.explicit = False       # the explicit softmax path, not SDPA; soft-capping and sinks always take it
        self.keep_probs = False     # explicit path stores softmax probabilities in .probs (for plots)
        self.probs: torch.Tensor | None = None

    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            init_linear(proj, std, generator)
        init_linear(self.o_proj, out_std, generator)     # writes into the residual stream
        if self.g_proj is not None:
            init_linear(self.g_proj, std, generator)
        init_norm(self.q_norm)
        init_norm(self.k_norm)
        if self.sinks is not None:   # logit 0: the sink starts as one more key of average weight, no draw
            nn.init.zeros_(self.sinks)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, rope: tuple | None,
                cache: LayerKV | None = None) -> torch.Tensor:
        # shapes: B batch, T new tokens, S keys (T, or cached + T), H query heads, Hkv kv heads, hd head_dim
        B, T, _ = x.shape                                                      # x: [B, T, d_model]
        q, k = self.q_proj(x), self.k_proj(x)                                  # [B, T, A], [B, T, K]
        if self.qk_all:
            q, k = self.q_norm(q), self.k_norm(k)        # over all heads at once (OLMoE)
        q = q.view(B, T, self.n_heads, self.hd).transpose(1, 2)                # [B, H, T, hd]
        k = k.view(B, T, self.kv_heads, self.hd).transpose(1, 2)               # [B, Hkv, T, hd]
        v = self.v_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)  # [B, Hkv, T, hd]
        if self.q_norm is not None and not self.qk_all and (rope is not None or not self.qk_rope_only):
            q, k = self.q_norm(q), self.k_norm(k)        # per head, over hd
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if self.temperature is not None:                 # [T, 1] multipliers, one per query position
            q = q * query_temperature(self.temperature, pos).to(q.dtype)[:, None]
        k_pos = pos                                      # [S] absolute key positions
        if cache is not None:
            if cache.k is not None:
                k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)   # [B, Hkv, S, hd]
            k_pos = torch.arange(cache.start, cache.start + k.shape[2], device=x.device)
            keep = keys_held(k.shape[2], self.window)
            cache.k, cache.v = k[:, :, -keep:], v[:, :, -keep:]
            cache.start = int(k_pos[-1]) + 1 - keep
        plain_causal = cache is None and self.window is None and not self.alibi
        bias = alibi_bias(self.n_heads, pos, k_pos) if self.alibi else None
        if self.explicit or self.softcap is not None or self.sinks is not None or self.keep_probs:
            y = self._explicit(q, k, v, visible(pos, k_pos, self.window), bias)
        else:
            mask = None if plain_causal else visible(pos, k_pos, self.window)
            if bias is not None:   # one additive float mask [H, Tq, Tk]: the ALiBi penalty, -inf where hidden
                mask = bias.masked_fill(~mask, -math.inf).to(q.dtype)[None]   # 4-D keeps the fused kernel
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=plain_causal, enable_gqa=self.kv_heads != self.n_heads,
                scale=self.scale, dropout_p=self.dropout if self.training else 0.0)              # [B, H, T, hd]
        y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.hd)                  # [B, T, A]
        if self.g_proj is not None:   # the output gate (Qwen3-Next): a sigmoid per dimension or per head
            g = torch.sigmoid(self.g_proj(x))                                          # [B, T, A] or [B, T, H]
            y = y * g if self.gate == "elementwise" else (y.view(B, T, self.n_heads, self.hd) * g[..., None]).view(
                B, T, self.n_heads * self.hd)
        out = self.o_proj(y)                                                           # [B, T, d_model]
        return out * self.out_scale if self.out_scale != 1.0 else out

    def _explicit(self, q, k, v, allowed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        group = self.n_heads // self.kv_heads
        if group > 1:                                    # each kv head serves `group` query heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)   # [B, H, S, hd]
        scores = (q @ k.transpose(-2, -1)) * (self.hd ** -0.5 if self.scale is None else self.scale)
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)   # cap first, then mask
        if bias is not None:
            scores = scores + bias.to(scores.dtype)
        scores = scores.masked_fill(~allowed, -math.inf)
        fp = torch.promote_types(q.dtype, torch.float32)
        if self.sinks is None:
            probs = torch.softmax(scores, dim=-1, dtype=fp).to(q.dtype)
        else:   # the sink is a last column that takes probability mass; dropped before the values are mixed
            sink = self.sinks.to(scores.dtype).view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
            probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1, dtype=fp)[..., :-1].to(q.dtype)
        if self.keep_probs:
            self.probs = probs.detach()
        probs = F.dropout(probs, self.dropout, self.training)
        return probs @ v                                 # [B, H, T, hd]


# Closed forms of one attention layer. d = d_model, A = n_heads*head_dim, K = kv_heads*head_dim.
ATTENTION_IMPLS = ("sdpa", "explicit")


def attention_params(cfg: ModelConfig) -> dict[str, int]:
    """q: d*A (+A), k and v: d*K (+K each), o: A*d (+d); q/k/v biases with bias or qkv_bias, o's with bias;
    QK-norm adds two norms of width head_dim (all_heads: one of width A for q, one of width K for k;
    rope_heads: none, it has no gain); sinks one logit per query head, H; an output gate d*A (+A) elementwise or
    d*H (+H) per head (q's bias rule)."""
    d, A, K = cfg.d_model, cfg.attn_width, cfg.kv_width
    qkv_bias = cfg.bias or cfg.qkv_bias
    gates = _gate_width(cfg)
    return {"attention_q": d * A + (A if qkv_bias else 0),
            "attention_gate": d * gates + (gates if qkv_bias else 0),
            "attention_k": d * K + (K if qkv_bias else 0),
            "attention_v": d * K + (K if qkv_bias else 0),
            "attention_o": A * d + (d if cfg.bias else 0),
            "qk_norm": _qk_norm_params(cfg),
            "attention_sinks": cfg.n_heads if cfg.attn_sinks else 0}


def _qk_norm_params(cfg: ModelConfig) -> int:
    if not cfg.qk_norm or cfg.qk_norm_scope == "rope_heads":   # no gain: nothing to learn
        return 0
    if cfg.qk_norm_scope == "all_heads":
        return norm_params(cfg, cfg.attn_width) + norm_params(cfg, cfg.kv_width)
    return 2 * norm_params(cfg, cfg.head_width)


def _gate_width(cfg: ModelConfig) -> int:
    """Outputs of the gate projection: A (elementwise), H (per head) or 0 (no gate)."""
    return {None: 0, "elementwise": cfg.attn_width, "head": cfg.n_heads}[cfg.attn_gate]


def attention_matmul_params(cfg: ModelConfig) -> int:
    """Weights in the projections' matrix products (2 FLOPs each per token): d*A + 2*d*K + A*d, plus the
    gate's d*A or d*H."""
    d, A, K = cfg.d_model, cfg.attn_width, cfg.kv_width
    return d * A + 2 * d * K + A * d + d * _gate_width(cfg)


def score_flops(cfg: ModelConfig, batch: int, pairs: int) -> int:
    """QK^T and PV over `pairs` query-key pairs per sequence: 2 products * 2 FLOPs * A each; MLA (whose
    heads differ in width) 2 * H * (qk_head_dim + v_head_dim). Sinks add no product (one more softmax column
    per query, elementwise work like the softmax itself, which no FLOP count here includes)."""
    width = cfg.n_heads * (cfg.qk_head_dim + cfg.v_head_dim) if cfg.mla else 2 * cfg.attn_width
    return 2 * width * batch * pairs


def kv_bytes(cfg: ModelConfig, batch: int, tokens: int, window: Span, e: int) -> int:
    """One layer's cached K and V after `tokens` positions: 2 * held * B * K * e."""
    return 2 * keys_held(tokens, window) * batch * cfg.kv_width * e


def attention_saved_bytes(cfg: ModelConfig, B: int, T: int, e: int, window: Span, impl: str,
                          add: Callable[[str, int], None], rope: bool = True, temperature: bool = False) -> None:
    """Saved tensors of one attention layer, excluding its input (the normed residual) and its output:
    SDPA (CPU flash) keeps q, k, v as passed (K-wide for GQA), its output, the fp32 logsumexp and a window
    mask; with dropout it falls back to the math path in fp32 (q, k^T, v broadcast to A, probs, noise,
    dropped probs); the explicit path keeps q, k^T, v (A-wide), a bool mask, (tanh of capped scores), the
    fp32 softmax output (with sinks one column wider, T + 1) and either dropout noise + dropped probs or the
    probs cast to e. ALiBi makes SDPA's mask one additive [H, T, T] float mask. An output gate keeps its
    sigmoid (A or H wide) and the gated output o_proj reads. `rope`: whether this layer rotates q and k
    (rope_heads QK-norm runs only then); `temperature`: whether it scales q by the long-context temperature (the
    multiply keeps its [T, 1] factor). `add(term, bytes)`."""
    N, A, K, H, hd = B * T, cfg.attn_width, cfg.kv_width, cfg.n_heads, cfg.head_width
    drop = cfg.dropout > 0
    add("attn_gate", N * (_gate_width(cfg) + A) * e if cfg.attn_gate else 0)
    all_heads = cfg.qk_norm and cfg.qk_norm_scope == "all_heads"
    if all_heads:                                  # one norm over the whole q (A wide) and k (K wide)
        add("qk_norm", norm_saved_bytes(cfg, N, A, e) + norm_saved_bytes(cfg, N, K, e))
    rope_heads = cfg.qk_norm_scope == "rope_heads"
    per_head = cfg.qk_norm and not all_heads and (rope or not rope_heads)
    if per_head:
        gain = False if rope_heads else None
        add("qk_norm", norm_saved_bytes(cfg, N * H, hd, e, affine=gain)
            + norm_saved_bytes(cfg, N * cfg.kv_heads, hd, e, affine=gain))
    add("rope_tables", rope_layer_bytes(cfg, T, e) if rope else 0)
    add("attn_temperature", T * e if temperature else 0)
    scores = B * H * T * T * e
    explicit = impl == "explicit" or cfg.attn_softcap is not None or cfg.attn_sinks
    if not explicit and not drop:
        add("attn_qkv", N * (A + 2 * K) * e)
        # the kernel's output takes q's layout: a view of q_proj ([B,T,H,hd] memory) makes o_proj's input a
        # view of it; q rebuilt by per-head QK-norm or partial RoPE is [B,H,T,hd]-contiguous, so o_proj gets a
        # copy (all-heads QK-norm runs before the split into heads and keeps the [B,T,H,hd] layout)
        q_rebuilt = per_head or (rope and 0 < cfg.rotary_dim < hd)
        add("attn_out", N * A * e * (2 if q_rebuilt else 1))
        add("attn_lse", B * H * T * STAT)
        if cfg.position == "alibi":                # ALiBi: one additive float mask per head
            add("attn_mask", H * T * T * e)
        elif window is not None:
            add("attn_mask", T * T * e)            # the bool window mask, converted to an additive float mask
        return
    add("attn_out", N * A * e)                     # the [B,T,A] copy o_proj reads
    if not explicit:                               # SDPA's math fallback (dropout) computes in fp32 on CPU:
        add("attn_qkv", 3 * N * A * STAT)          # q, k^T, v broadcast to all H heads,
        add("attn_scores", 3 * B * H * T * T * STAT)   # probabilities, dropout noise, dropped probabilities
        return
    add("attn_qkv", 3 * N * A * e)                 # q, k^T and v, broadcast to all H heads
    add("attn_mask", T * T)                        # bool, one per layer
    add("attn_scores", B * H * T * (T + cfg.attn_sinks) * STAT   # softmax output (fp32; a sink column), then
        + (2 * scores if drop else scores if e != STAT else 0)   # dropout (noise, dropped probs) or the cast probs
        + (scores if cfg.attn_softcap is not None else 0))       # tanh of the capped scores
