"""What the Mamba-1 and Mamba-2 mixers share beyond the framework's short convolution (short_conv.py) and decode
cache (attention.LayerKV: the conv window and the recurrent state): their common declared fields, the
depthwise conv module they keep (nn.Conv1d, the weight layout every checkpoint uses), and the recompute that keeps
training memory to the projections' tensors, as the fused Mamba kernels do.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.attention import LayerKV
from engine.layers.short_conv import causal_conv
from engine.validation import Knobs, declare


@dataclass(frozen=True)
class SSMKnobs(Knobs):
    """What the Mamba-1 and Mamba-2 mixers share (engine/layers/mamba1.py, mamba2.py declare the rest)."""
    ssm_state: int = declare(128, "ssm", "N: numbers of recurrent state per channel (Mamba-2: per head "
                             "dimension); the state a sequence keeps is this many times the inner width.", lo=1)
    ssm_conv_kernel: int = declare(4, "ssm", "K: the short causal convolution in front of the scan sees the last "
                                   "K tokens of each channel; decoding keeps K-1 (or K) of them.", lo=1)
    ssm_conv_bias: bool = declare(True, "ssm", "A bias per channel on the short convolution.")
    ssm_proj_bias: bool = declare(False, "ssm", "Biases on the mixer's input and output projections.")
    ssm_chunk: int = declare(256, "ssm", "Mamba-2: tokens per chunk of the chunked scan (training and prefill): "
                             "inside a chunk an attention-like product, between chunks the state carried on. "
                             "Changes the FLOPs of prefill, never the result.", lo=1)


def compute_dtype(t: torch.Tensor) -> torch.dtype:
    """The scan's dtype: fp32 for bf16/fp16/fp32 models (as transformers' fallbacks compute), fp64 for fp64."""
    return torch.promote_types(t.dtype, torch.float32)


def make_conv(channels: int, kernel: int, bias: bool) -> nn.Conv1d:
    """A depthwise conv1d (one K-tap filter per channel) stored as transformers stores it, weight [C, 1, K]."""
    return nn.Conv1d(channels, channels, kernel, groups=channels, bias=bias)


def silu_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
              cache: LayerKV | None) -> torch.Tensor:
    """silu(causal depthwise conv) of x [B, T, C] with an nn.Conv1d weight [C, 1, K]; a cache is read and updated
    (short_conv.causal_conv)."""
    return F.silu(causal_conv(x, weight, bias, cache))


class _Recompute(torch.autograd.Function):
    """Saves only its tensor inputs; backward runs `fn` again with autograd on and differentiates that. The
    fused Mamba kernels do the same (mamba_ssm's split-conv1d-scan and mamba_inner_fn): nothing between in_proj
    and out_proj is kept for backward, which costs one more forward of the conv and the scan."""

    @staticmethod
    def forward(ctx, fn, *args):
        ctx.fn = fn
        ctx.save_for_backward(*args)
        return fn(*args)

    @staticmethod
    def backward(ctx, grad):
        wants = ctx.needs_input_grad[1:]
        args = [a.detach().requires_grad_(w) if a is not None else None for a, w in zip(ctx.saved_tensors, wants)]
        with torch.enable_grad():
            out = ctx.fn(*args)
        leaves = [a for a, w in zip(args, wants) if w]
        grads = iter(torch.autograd.grad(out, leaves, grad))   # every argument reaches both callers' outputs
        return (None, *(next(grads) if w else None for w in wants))


def recompute(fn, *args: torch.Tensor | None) -> torch.Tensor:
    """fn(*args), keeping only args for backward (see _Recompute) when a gradient will be asked for."""
    if torch.is_grad_enabled() and any(a is not None and a.requires_grad for a in args):
        return _Recompute.apply(fn, *args)
    return fn(*args)
