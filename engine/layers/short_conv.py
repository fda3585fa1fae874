"""The short causal depthwise convolution in front of recurrent mixers (Gated DeltaNet, Mamba, KDA), and the
window of past inputs a decode cache keeps for it.

y[:, t, c] = sum_j w[c, j] x[:, t - (K-1) + j, c]: each channel sees its own last K inputs. Training and prefill
pad K-1 zeros on the left (one conv1d computes exactly T outputs, so FlopCounterMode counts 2*K*C per token);
a decode cache keeps the last K-1 inputs, the fewest the next step needs (vLLM and llama.cpp keep K-1 too;
transformers keeps K, see engine/layers/state.py).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.layers.attention import LayerKV


def causal_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                cache: LayerKV | None = None) -> torch.Tensor:
    """x [B, T, C], weight [C, 1, K] (a depthwise nn.Conv1d's; bias [C]) -> [B, T, C]; with a cache, its last
    K-1 inputs come first and the new window is kept in `cache.conv` [B, C, K-1] (nothing when K = 1)."""
    C, _, K = weight.shape
    xt = x.transpose(1, 2)                                            # [B, C, T]
    if cache is not None and cache.conv is not None:
        full = torch.cat([cache.conv.to(xt.dtype), xt], dim=-1)
    else:
        full = F.pad(xt, (K - 1, 0))                                  # [B, C, K-1+T]
    if cache is not None and K > 1:
        cache.conv = full[:, :, -(K - 1):].contiguous()
    return F.conv1d(full, weight, bias, groups=C).transpose(1, 2)


def conv_params(channels: int, kernel: int, bias: bool = False) -> int:
    """Depthwise: one K-tap filter per channel (+ one bias each)."""
    return channels * kernel + (channels if bias else 0)
