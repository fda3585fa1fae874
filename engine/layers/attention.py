"""Causal self-attention: MHA/GQA/MQA, head_dim independent of d_model, sliding window, QK-norm, soft-capping.

Two paths compute the same thing: PyTorch's fused scaled_dot_product_attention, and an explicit
softmax(QK^T/sqrt(d)) V that also handles soft-capping (cap the scores, then mask) and can keep the
attention probabilities for plots.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import ModelConfig
from engine.layers.norm import make_norm
from engine.layers.position import alibi_bias, apply_rope


class LayerKV:
    """One layer's cached keys and values [B, kv_heads, S, hd] and the absolute position of the first key.
    A sliding-window layer keeps only the last `window` positions, so its cache really is smaller."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.start = 0

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.k, self.v) if t is not None)


def visible(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
    """Bool [Tq, Tk]: key j is visible to query i iff j <= i and (no window or i - j < window)."""
    d = q_pos[:, None] - k_pos[None, :]
    ok = d >= 0
    return ok & (d < window) if window is not None else ok


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, window: int | None):
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
        self.q_norm = make_norm(cfg, self.hd) if cfg.qk_norm else None
        self.k_norm = make_norm(cfg, self.hd) if cfg.qk_norm else None
        self.impl = "sdpa"          # "sdpa" or "explicit"; soft-capping always takes the explicit path
        self.keep_probs = False     # explicit path stores softmax probabilities in .probs (for plots)
        self.probs: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, pos: torch.Tensor, rope: tuple | None,
                cache: LayerKV | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        k_pos = pos
        if cache is not None:
            if cache.k is not None:
                k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)
            k_pos = torch.arange(cache.start, cache.start + k.shape[2], device=x.device)
            keep = k.shape[2] if self.window is None else min(k.shape[2], self.window)
            cache.k, cache.v = k[:, :, -keep:], v[:, :, -keep:]
            cache.start = int(k_pos[-1]) + 1 - keep
        plain_causal = cache is None and self.window is None and not self.alibi
        bias = alibi_bias(self.n_heads, pos, k_pos) if self.alibi else None
        if self.impl == "explicit" or self.softcap is not None or self.keep_probs:
            y = self._explicit(q, k, v, visible(pos, k_pos, self.window), bias)
        else:
            mask = None if plain_causal else visible(pos, k_pos, self.window)
            if bias is not None:   # one additive float mask [H, Tq, Tk]: the ALiBi penalty, -inf where hidden
                mask = bias.masked_fill(~mask, float("-inf")).to(q.dtype)[None]   # 4-D keeps the fused kernel
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=plain_causal, enable_gqa=self.kv_heads != self.n_heads, scale=self.scale,
                dropout_p=self.dropout if self.training else 0.0)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.n_heads * self.hd))

    def _explicit(self, q, k, v, allowed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        group = self.n_heads // self.kv_heads
        if group > 1:
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-2, -1)) * (self.hd ** -0.5 if self.scale is None else self.scale)
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)   # cap first, then mask
        if bias is not None:
            scores = scores + bias.to(scores.dtype)
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1, dtype=torch.promote_types(q.dtype, torch.float32)).to(q.dtype)
        if self.keep_probs:
            self.probs = probs.detach()
        probs = F.dropout(probs, self.dropout, self.training)
        return probs @ v
