"""One transformer block: serial or parallel layout, norms placed pre, post or sandwich."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import ModelConfig
from engine.layers.attention import Attention, LayerKV
from engine.layers.ffn import make_ffn
from engine.layers.moe import MoE
from engine.layers.norm import make_norm


def block_norm_count(cfg: ModelConfig) -> int:
    """Norms of width d_model in one block (the modules created below)."""
    if cfg.norm_placement == "post":
        return 1 if cfg.block == "parallel" else 2
    inputs = 1 if cfg.block == "parallel" and cfg.parallel_shared_norm else 2
    return inputs + (2 if cfg.norm_placement == "sandwich" else 0)


class Block(nn.Module):
    """serial pre:      x = x + A(N1(x));      x = x + F(N2(x))
    serial post:     x = N1(x + A(x));      x = N2(x + F(x))
    serial sandwich: x = x + P1(A(N1(x)));  x = x + P2(F(N2(x)))
    parallel pre:    x = x + A(N1(x)) + F(N2(x))      (N2 is N1 with a shared norm)
    parallel post:   x = N1(x + A(x) + F(x))
    parallel sandwich: x = x + P1(A(N1(x))) + P2(F(N2(x)))"""

    def __init__(self, cfg: ModelConfig, window: int | None, moe: bool = False):
        super().__init__()
        self.parallel, self.placement, self.p = cfg.block == "parallel", cfg.norm_placement, cfg.dropout
        self.attn = Attention(cfg, window)
        self.ffn = MoE(cfg) if moe else make_ffn(cfg)
        self.norm1 = make_norm(cfg)
        shared = self.parallel and (cfg.parallel_shared_norm or self.placement == "post")
        self.norm2 = None if shared else make_norm(cfg)
        sandwich = self.placement == "sandwich"
        self.post_attn_norm = make_norm(cfg) if sandwich else None
        self.post_ffn_norm = make_norm(cfg) if sandwich else None

    def _attn(self, h, pos, rope, cache):
        y = self.attn(h, pos, rope, cache)
        y = self.post_attn_norm(y) if self.post_attn_norm is not None else y
        return F.dropout(y, self.p, self.training)

    def _ffn(self, h):
        y = self.ffn(h)
        y = self.post_ffn_norm(y) if self.post_ffn_norm is not None else y
        return F.dropout(y, self.p, self.training)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, rope: tuple | None,
                cache: LayerKV | None = None) -> torch.Tensor:
        if self.placement == "post":
            if self.parallel:
                return self.norm1(x + self._attn(x, pos, rope, cache) + self._ffn(x))
            x = self.norm1(x + self._attn(x, pos, rope, cache))
            return self.norm2(x + self._ffn(x))
        if self.parallel:
            h1 = self.norm1(x)
            h2 = h1 if self.norm2 is None else self.norm2(x)
            return x + self._attn(h1, pos, rope, cache) + self._ffn(h2)
        x = x + self._attn(self.norm1(x), pos, rope, cache)
        return x + self._ffn(self.norm2(x))
