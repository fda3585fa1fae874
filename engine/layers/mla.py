"""Multi-head latent attention (MLA, DeepSeek-V2/V3), as transformers' DeepseekV2/V3Attention computes it.
(This file is longer than 300 lines: the family's declared fields, its module, its layout for the diagram and its
closed forms stay in one place.)

Each token's keys and values come from one latent c = RMSNorm(x W_dkv) of width r = kv_lora_rank: per head, the
non-rotary key part and the value are up-projections of c (kv_b). Position enters through a decoupled rotary key
k_rot = RoPE(x W_kr) of width qk_rope_head_dim, one head shared by every query head. A query head is
[q_nope | RoPE(q_rot)], from x directly or through its own latent (q_lora_rank). So a decode step needs only
c and k_rot per past token: the latent cache. The expanded cache keeps the per-head keys and values instead
(what a plain attention cache would hold); both give the same logits. With sparse attention (index_topk, DeepSeek-
V3.2 and GLM-5) each query attends only to the keys a lightning indexer keeps (engine/layers/indexer.py).
Below the module: the closed forms.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.attention import LayerKV
from engine.layers.indexer import Chosen, LightningIndexer
from engine.layers.span import keys_held, visible
from engine.layers.init import init_linear, init_norm
from engine.layers.norm import STAT, make_norm, norm_params, norm_saved_bytes
from engine.layers.position import apply_rope, rope_saved_bytes
from engine.validation import Knobs, declare, shown

if TYPE_CHECKING:   # engine.config assembles ModelConfig from this module's knobs
    from engine.config import ModelConfig

# ---- declared fields (engine/config.py assembles every family's into ModelConfig) ----------------------------
@dataclass(frozen=True)
class MLAKnobs(Knobs):
    """Multi-head latent attention; kv_lora_rank null keeps MHA/GQA/MQA."""
    kv_lora_rank: int | None = declare(None, "attention", "MLA (DeepSeek-V2/V3): keys and values are rebuilt from "
                                        "one latent of this width per token, which is all the cache holds (with "
                                        "the shared rotary key).", lo=1, null="standard attention (MHA/GQA/MQA)")
    q_lora_rank: int | None = declare(None, "attention", "MLA: queries pass through a latent of this width "
                                       "(down-projection, RMSNorm, up-projection).", lo=1,
                                       null="a full query projection")
    qk_rope_head_dim: int = declare(64, "attention", "MLA: rotary part of each query/key head; the rotary key is "
                                     "one head shared by all query heads.", lo=2)
    qk_nope_head_dim: int = declare(128, "attention", "MLA: non-rotary part of each query/key head, rebuilt "
                                     "from the latent.", lo=1)
    v_head_dim: int = declare(128, "attention", "MLA: width of each value head.", lo=1)
    mla_rope_interleave: bool = declare(True, "attention", "MLA: the rotary dimensions rotate in adjacent pairs "
                                         "(x0, x1), (x2, x3), ... as DeepSeek's weights expect, instead of halves.")
    mla_norm_eps: float | None = declare(None, "attention", "MLA: epsilon of the RMSNorms on the latents "
                                          "(transformers' DeepSeek and Kimi Linear fix 1e-6 there, whatever "
                                          "rms_norm_eps says, e.g. GLM-5's 1e-5).", lo=0, lo_open=True,
                                          null="norm_eps")

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def qk_head_dim(self) -> int:
        """MLA: width of each query/key head, the non-rotary part followed by the rotary part."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        """MLA (kv_lora_rank set) as DeepSeek defines it: rotary positions on a decoupled key (or none at all, as
        Kimi Linear's NoPE MLA: that key is then not rotated), every query head with its own keys and values
        rebuilt from the latent, full causal attention."""
        if c.kv_lora_rank is None or not ok("kv_lora_rank"):
            return []
        out = []
        need = {"position": ("rope or none", c.position in ("rope", "none")),
                "n_kv_heads": ("null", c.n_kv_heads is None),
                "head_dim": ("null", c.head_dim is None), "rope_fraction": ("1", c.rope_fraction == 1.0),
                "attn_window": ("null", c.attn_window is None), "qk_norm": ("false", not c.qk_norm),
                "attn_softcap": ("null", c.attn_softcap is None), "nope_layers": ("null", c.nope_layers is None),
                "attn_sinks": ("false", not c.attn_sinks), "attn_chunk": ("null", c.attn_chunk is None),
                "attn_temperature": ("null", c.attn_temperature is None)}
        for name, (want, holds) in need.items():
            if ok(name) and not holds:
                out.append(f"{name}: MLA (kv_lora_rank set) needs {name}: {want}, got {shown(getattr(c, name))}")
        if ok("qk_rope_head_dim") and c.qk_rope_head_dim % 2:
            out.append(f"qk_rope_head_dim: rotary dimensions rotate in pairs; {c.qk_rope_head_dim} is odd")
        return out


CACHE_KINDS = ("latent", "expanded")


@dataclass(frozen=True)
class Projection:
    name: str       # the MLA module's attribute (an nn.Linear)
    d_in: int
    d_out: int
    bias: bool


@dataclass(frozen=True)
class MLALayout:
    """The structure of one MLA layer, for the block diagram: its projections in data-flow order (query path,
    then the key/value down- and up-projections, then the output), the latent norms and what the latent cache
    holds per token. tests/test_diagram_mla.py holds it against the built module and a decode step's cache."""
    heads: int
    q_lora_rank: int | None          # None: one full query projection
    kv_lora_rank: int
    rope_dim: int                    # qk_rope_head_dim: the rotary key, one head shared by every query head
    nope_dim: int                    # qk_nope_head_dim: per head, rebuilt from the latent
    v_dim: int
    projections: tuple[Projection, ...]
    norms: tuple[tuple[str, int], ...]       # (module attribute, width): RMSNorm on each latent
    cached: tuple[tuple[str, int], ...]      # per token and layer: (what, width), the latent cache's two tensors


def mla_layout(cfg: ModelConfig) -> MLALayout:
    d, H, r, rq = cfg.d_model, cfg.n_heads, cfg.kv_lora_rank, cfg.q_lora_rank
    dn, dr, dv = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    query = ((Projection("q_proj", d, H * (dn + dr), False),) if rq is None else     # one full query projection,
             (Projection("q_a", d, rq, cfg.bias), Projection("q_b", rq, H * (dn + dr), False)))   # or down, up
    return MLALayout(
        heads=H, q_lora_rank=rq, kv_lora_rank=r, rope_dim=dr, nope_dim=dn, v_dim=dv,
        projections=query + (Projection("kv_a", d, r + dr, cfg.bias),          # down: latent and rotary key
                             Projection("kv_b", r, H * (dn + dv), False),     # up: keys and values per head
                             Projection("o_proj", H * dv, d, cfg.bias)),
        norms=(() if rq is None else (("q_norm", rq),)) + (("kv_norm", r),),
        cached=(("latent", r), ("rotary key", dr)))


class MLA(nn.Module):
    ROLES = {"q_proj": ("q", "matrix"), "q_a": ("q_a", "matrix"), "q_b": ("q_b", "matrix"),
             "kv_a": ("kv_a", "matrix"), "kv_b": ("kv_b", "matrix"), "o_proj": ("o", "matrix"),
             "q_norm": ("norm", "norm"), "kv_norm": ("norm", "norm")}   # the indexer: its own ROLES

    def __init__(self, cfg: ModelConfig, indexer: bool = True):
        """indexer: with sparse attention (index_topk), whether this layer runs its own lightning indexer or
        reuses the previous indexer layer's choice (a shared layer)."""
        super().__init__()
        d, H = cfg.d_model, cfg.n_heads
        self.H, self.r, self.dn, self.dr, self.dv = H, cfg.kv_lora_rank, cfg.qk_nope_head_dim, \
            cfg.qk_rope_head_dim, cfg.v_head_dim
        self.interleave, self.dropout = cfg.mla_rope_interleave, cfg.dropout
        self.scale, self.out_scale = mla_softmax_scale(cfg), cfg.attn_out_scale
        if cfg.q_lora_rank is None:
            self.q_proj = nn.Linear(d, H * cfg.qk_head_dim, bias=False)
            self.q_a = self.q_norm = self.q_b = None
        else:
            self.q_proj = None
            self.q_a = nn.Linear(d, cfg.q_lora_rank, bias=cfg.bias)
            self.q_norm = make_norm(cfg, cfg.q_lora_rank, eps=cfg.mla_norm_eps)
            self.q_b = nn.Linear(cfg.q_lora_rank, H * cfg.qk_head_dim, bias=False)
        self.kv_a = nn.Linear(d, self.r + self.dr, bias=cfg.bias)       # latent and shared rotary key
        self.kv_norm = make_norm(cfg, self.r, eps=cfg.mla_norm_eps)
        self.kv_b = nn.Linear(self.r, H * (self.dn + self.dv), bias=False)
        self.o_proj = nn.Linear(H * self.dv, d, bias=cfg.bias)
        self.sparse = cfg.index_topk is not None
        self.indexer = LightningIndexer(cfg) if self.sparse and indexer else None
        self.cache_kind = "latent"  # what a decode cache holds: "latent" (c, k_rot) or "expanded" (k, v)
        self.explicit = False       # the explicit softmax path, not SDPA (it can keep the probabilities for plots)
        self.keep_probs = False
        self.probs: torch.Tensor | None = None

    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        for proj in (self.q_proj, self.q_a, self.q_b, self.kv_a, self.kv_b):
            if proj is not None:
                init_linear(proj, std, generator)
        init_linear(self.o_proj, out_std, generator)
        init_norm(self.q_norm)
        init_norm(self.kv_norm)
        if self.indexer is not None:
            self.indexer.init_weights(std, generator)

    def _rope(self, x: torch.Tensor, rope: tuple | None) -> torch.Tensor:
        if rope is None:      # position none: the shared key part is not rotated (Kimi Linear's NoPE MLA)
            return x
        if self.interleave:   # pairs (x0, x1), (x2, x3), ... -> halves; q and k alike, so q.k is unchanged
            x = torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)
        return apply_rope(x, *rope)

    def expand(self, c: torch.Tensor, k_rot: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Latent c [B, 1, S, r] and rotary key [B, 1, S, dr] -> keys [B, H, S, dn + dr], values [B, H, S, dv]."""
        B, _, S, _ = c.shape
        kv = self.kv_b(c).view(B, S, self.H, self.dn + self.dv).transpose(1, 2)   # [B, H, S, dn + dv]
        k_nope, v = kv.split([self.dn, self.dv], dim=-1)
        return torch.cat([k_nope, k_rot.expand(B, self.H, S, self.dr)], dim=-1), v

    def forward(self, x: torch.Tensor, pos: torch.Tensor, rope: tuple, cache: LayerKV | None = None,
                chosen: Chosen | None = None) -> torch.Tensor:
        B, T, _ = x.shape                                                  # x: [B, T, d_model]
        q_latent = None if self.q_proj is not None else self.q_norm(self.q_a(x))   # [B, T, rq]
        q = self.q_proj(x) if q_latent is None else self.q_b(q_latent)
        q = q.view(B, T, self.H, self.dn + self.dr).transpose(1, 2)       # [B, H, T, dn + dr]
        q_nope, q_rot = q.split([self.dn, self.dr], dim=-1)
        c, k_rot = self.kv_a(x).split([self.r, self.dr], dim=-1)           # [B, T, r], [B, T, dr]
        c = self.kv_norm(c).view(B, 1, T, self.r)
        k_rot = self._rope(k_rot.view(B, 1, T, self.dr), rope)
        q = torch.cat([q_nope, self._rope(q_rot, rope)], dim=-1)
        if cache is not None and self.cache_kind == "latent":
            if cache.k is not None:
                c, k_rot = torch.cat([cache.k, c], dim=2), torch.cat([cache.v, k_rot], dim=2)
            cache.k, cache.v = c, k_rot                                    # [B, 1, S, r], [B, 1, S, dr]
        k, v = self.expand(c, k_rot)                                       # [B, H, S, dqk], [B, H, S, dv]
        if cache is not None and self.cache_kind == "expanded":
            if cache.k is not None:
                k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)
            cache.k, cache.v = k, v
        k_pos = torch.arange(k.shape[2], device=x.device) if cache is not None else pos
        allowed = visible(pos, k_pos, None)                                # [T, S]
        if self.sparse:   # only the keys the indexer kept (this layer's, or the last indexer layer's)
            if self.indexer is not None:
                keep = self.indexer(x, q_latent, allowed, rope, cache)     # [B, T, S]
                if chosen is not None:
                    chosen.keep = keep
            else:
                keep = chosen.keep
            allowed = keep[:, None]                                        # [B, 1, T, S]
        if self.explicit or self.keep_probs:
            scores = (q @ k.transpose(-2, -1)) * self.scale                # [B, H, T, S]
            scores = scores.masked_fill(~allowed, -math.inf)
            probs = torch.softmax(scores, dim=-1, dtype=torch.promote_types(q.dtype, torch.float32)).to(q.dtype)
            if self.keep_probs:
                self.probs = probs.detach()
            y = F.dropout(probs, self.dropout, self.training) @ v
        else:
            causal = cache is None and not self.sparse
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal else allowed, is_causal=causal,
                                               scale=self.scale,
                                               dropout_p=self.dropout if self.training else 0.0)
        out = self.o_proj(y.transpose(1, 2).reshape(B, T, self.H * self.dv))    # [B, T, d_model]
        return out * self.out_scale if self.out_scale != 1.0 else out


def mla_softmax_scale(cfg: ModelConfig) -> float:
    """attn_scale or 1/sqrt(qk_head_dim), times DeepSeek's YaRN correction m^2 when rope_mscale_all_dim is set:
    m = 0.1 * mscale_all_dim * ln(rope_factor) + 1 (1 for rope_factor <= 1), as transformers' yarn_get_mscale.
    The cos/sin tables carry yarn's own attention factor; this one sharpens the softmax of every head."""
    scale = cfg.qk_head_dim ** -0.5 if cfg.attn_scale is None else cfg.attn_scale
    if cfg.rope_mscale_all_dim is None or cfg.rope_scaling != "yarn" or cfg.rope_factor <= 1:
        return scale
    return scale * (0.1 * cfg.rope_mscale_all_dim * math.log(cfg.rope_factor) + 1.0) ** 2


# Closed forms of one MLA layer. d = d_model, H = n_heads, r = kv_lora_rank, rq = q_lora_rank,
# dn, dr, dv = qk_nope_head_dim, qk_rope_head_dim, v_head_dim; dqk = dn + dr.

def mla_params(cfg: ModelConfig) -> dict[str, int]:
    """attention_q: d*H*dqk, or with a query latent d*rq (+rq) + rq*H*dqk; attention_k: the down-projection
    to latent and rotary key d*(r + dr) (+(r + dr)) and the key up-projection r*H*dn; attention_v: the value
    up-projection r*H*dv; attention_o: H*dv*d (+d); qk_norm: the RMSNorms on the latents (rq and r wide).
    Biases (bias: true) sit where DeepSeek's attention_bias puts them: q_a, kv_a and o."""
    d, H, r, dr = cfg.d_model, cfg.n_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    b, rq = cfg.bias, cfg.q_lora_rank
    q = d * H * cfg.qk_head_dim if rq is None else d * rq + (rq if b else 0) + rq * H * cfg.qk_head_dim
    return {"attention_q": q,
            "attention_k": d * (r + dr) + ((r + dr) if b else 0) + r * H * cfg.qk_nope_head_dim,
            "attention_v": r * H * cfg.v_head_dim,
            "attention_o": H * cfg.v_head_dim * d + (d if b else 0),
            "qk_norm": norm_params(cfg, r) + (norm_params(cfg, rq) if rq is not None else 0)}


def mla_matmul_params(cfg: ModelConfig) -> int:
    """Weights in matrix products per token (2 FLOPs each): the query path, d*(r + dr), r*H*(dn + dv), H*dv*d;
    each token's latent is up-projected once (as the module does in a full forward)."""
    d, H, r, rq = cfg.d_model, cfg.n_heads, cfg.kv_lora_rank, cfg.q_lora_rank
    q = d * H * cfg.qk_head_dim if rq is None else d * rq + rq * H * cfg.qk_head_dim
    return q + d * (r + cfg.qk_rope_head_dim) + r * H * (cfg.qk_nope_head_dim + cfg.v_head_dim) + H * cfg.v_head_dim * d


def mla_score_width(cfg: ModelConfig) -> int:
    """Multiply-adds per query-key pair: QK^T over H*dqk, PV over H*dv."""
    return cfg.n_heads * (cfg.qk_head_dim + cfg.v_head_dim)


def mla_kv_bytes(cfg: ModelConfig, batch: int, tokens: int, e: int, kind: str = "latent") -> int:
    """One layer's cache after `tokens` positions: latent held*B*(r + dr)*e, or expanded held*B*H*(dqk + dv)*e."""
    width = cfg.kv_lora_rank + cfg.qk_rope_head_dim if kind == "latent" else mla_score_width(cfg)
    return keys_held(tokens, None) * batch * width * e


def mla_saved_bytes(cfg: ModelConfig, B: int, T: int, e: int, impl: str, add) -> None:
    """Saved tensors of one MLA layer beyond its input (the normed residual), by term (`add(term, bytes)`).
    Measured on CPU (held by tests/test_mla.py and the MLA variant grid against saved-tensor hooks):
      latent norms  the kv latent's norm (its input is a slice of the kv_a output, so where the norm saves its
                    input itself, in fp32 or as a LayerNorm, the whole [N, r + dr] storage is held) and the
                    up-projection's input [N, r]; with a query latent the same for the q norm ([N, rq], whole)
                    and q_b's input; outside fp32 the rotary tables cast for this layer
      SDPA          with dropout, or qk_head_dim != v_head_dim: its math path, in fp32: q, k^T [B*H, ., dqk],
                    v [B*H, S, dv], the probabilities (with dropout also its noise and the dropped
                    probabilities); equal widths without dropout: the flash kernel keeps q, k, the value slice
                    of the up-projection (its [N, H*(dn + dv)] storage), its output, the fp32 logsumexp and,
                    with sparse attention, the top-k mask as an additive float mask [B, 1, T, T]
      explicit      q, k^T, a contiguous copy of v, the bool mask ([T, S], or [B, 1, T, S] with sparse
                    attention), the fp32 softmax, then dropout's noise and dropped probabilities or the cast
                    probabilities outside fp32
      either        o_proj's input [N, H*dv]
    The lightning indexer runs without gradients: it saves nothing."""
    N, H, r, dr, rq = B * T, cfg.n_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim, cfg.q_lora_rank
    dqk, dv = cfg.qk_head_dim, cfg.v_head_dim
    own_copy = cfg.norm == "rmsnorm" and e != STAT   # the norm saves its own fp32 copy, not the kv_a slice
    latent = norm_saved_bytes(cfg, N, r, e) + N * r * e + (0 if own_copy else N * dr * e)
    if rq is not None:
        latent += norm_saved_bytes(cfg, N, rq, e) + N * rq * e
    add("latent_norms", latent)
    add("rope_tables", rope_saved_bytes(cfg, T, e)[1])
    scores = B * H * T * T
    if impl == "explicit":
        add("attn_qkv", B * H * T * (2 * dqk + dv) * e)
        add("attn_mask", B * T * T if cfg.sparse_attention else T * T)
        drop = 2 * scores * e if cfg.dropout > 0 else (scores * e if e != STAT else 0)
        add("attn_scores", scores * STAT + drop)
        add("attn_out", N * H * dv * e)
        return
    if cfg.dropout > 0 or dqk != dv:   # SDPA's math path, in fp32 on CPU (with dropout: noise, dropped probs)
        add("attn_qkv", B * H * T * (2 * dqk + dv) * STAT)
        add("attn_scores", (3 if cfg.dropout > 0 else 1) * scores * STAT)
    else:
        add("attn_qkv", B * H * T * 2 * dqk * e + N * H * (cfg.qk_nope_head_dim + dv) * e)
        add("attn_out", N * H * dv * e)
        add("attn_lse", B * H * T * STAT)
        add("attn_mask", B * T * T * e if cfg.sparse_attention else 0)
    add("attn_out", N * H * dv * e)
