"""What the Mamba-1 and Mamba-2 mixers share: the causal depthwise convolution (a prompt and a one-token step
through the same code), the state a decoder carries per sequence, and the conventions engines keep it in.

A selective state-space mixer reads its past through two fixed-size tensors per sequence, never through a cache
that grows with the context: the last conv inputs (the depthwise conv1d of kernel K needs K-1 of them) and the
recurrent state h (Mamba-2: heads x head_dim x state; Mamba-1: inner width x state).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engine.validation import Knobs, declare

STAT = 4   # bytes of an fp32 element: the recurrent state and the scan's working tensors


@dataclass(frozen=True)
class SSMKnobs(Knobs):
    """What the Mamba-1 and Mamba-2 mixers share (engine/layers/mamba1.py, mamba2.py declare the rest)."""
    ssm_state: int = declare(128, "ssm", "N: numbers of recurrent state per channel (Mamba-2: per head "
                             "dimension); the state a sequence keeps is this many times the inner width.", lo=1)
    ssm_conv_kernel: int = declare(4, "ssm", "K: the short causal convolution in front of the scan sees the last "
                                   "K tokens of each channel; decoding keeps K-1 (or K) of them.", lo=1)
    ssm_conv_bias: bool = declare(True, "ssm", "A bias per channel on the short convolution.")
    ssm_proj_bias: bool = declare(False, "ssm", "Biases on the mixer's input and output projections.")
    ssm_chunk: int = declare(256, "ssm", "Tokens per chunk of the chunked scan (training and prefill): inside a "
                             "chunk an attention-like product, between chunks the state carried on. Changes the "
                             "FLOPs of prefill, never the result.", lo=1)


class SSMState:
    """One mixer layer's decode state: conv [B, channels, K-1] (the last K-1 conv inputs) and the recurrent
    state (in the mixer's state_dtype). None until a first forward fills them."""

    def __init__(self) -> None:
        self.conv: torch.Tensor | None = None
        self.recurrent: torch.Tensor | None = None

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.conv, self.recurrent) if t is not None)


def causal_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                cache: SSMState | None = None) -> torch.Tensor:
    """silu(depthwise causal conv1d) over time: x [B, T, C], weight [C, 1, K] -> [B, T, C]. Position t sees inputs
    t-K+1 .. t; before the first token those are zeros, or, with a state, the K-1 inputs of the previous call
    (which it then replaces), so a prompt read in one call or token by token gives the same outputs."""
    K = weight.shape[-1]
    xt = x.transpose(1, 2)                                              # [B, C, T]
    if cache is not None and cache.conv is not None:
        xt = torch.cat([cache.conv.to(xt.dtype), xt], dim=-1)
    else:
        xt = F.pad(xt, (K - 1, 0))
    if cache is not None:
        cache.conv = xt[..., xt.shape[-1] - (K - 1):].detach().clone()  # the last K-1 inputs
    return F.silu(F.conv1d(xt, weight, bias, groups=weight.shape[0])).transpose(1, 2)


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
        grads = iter(torch.autograd.grad(out, leaves, grad, allow_unused=True))
        return (None, *(next(grads) if w else None for w in wants))


def recompute(fn, *args: torch.Tensor | None) -> torch.Tensor:
    """fn(*args), keeping only args for backward (see _Recompute) when a gradient will be asked for."""
    if torch.is_grad_enabled() and any(a is not None and a.requires_grad for a in args):
        return _Recompute.apply(fn, *args)
    return fn(*args)


def make_conv(channels: int, kernel: int, bias: bool) -> nn.Conv1d:
    """A depthwise conv1d (one K-tap filter per channel), unpadded: causal_conv pads on the left."""
    return nn.Conv1d(channels, channels, kernel, groups=channels, bias=bias)


def conv_params(channels: int, kernel: int, bias: bool) -> int:
    return channels * kernel + (channels if bias else 0)


@dataclass(frozen=True)
class StateConvention:
    """How an engine holds a mixer's decode state: how many past conv inputs it keeps (K - conv_short) and in
    which dtype it keeps them and the recurrent state (None: the model's dtype)."""
    name: str
    conv_short: int                  # kept conv positions = K - conv_short
    conv_bytes: int | None           # None: the model's element size
    ssm_bytes: int | None            # None: the model's element size (vLLM: mamba_ssm_cache_dtype)
    source: str


CONVENTIONS: dict[str, StateConvention] = {c.name: c for c in (
    StateConvention("transformers", 0, None, STAT,
                    "transformers 5.24 cache_utils.LinearAttentionLayer.update_conv_state keeps conv_kernel_size "
                    "positions; mamba2_chunk_scan / mamba_selective_scan return an fp32 state, copied as is"),
    StateConvention("vllm", 1, None, None,
                    "vLLM mamba_utils.MambaStateShapeCalculator: conv (conv_kernel - 1, conv_dim), temporal "
                    "(heads, head_dim, state); MambaStateDtypeCalculator: conv in mamba_cache_dtype, temporal in "
                    "mamba_ssm_cache_dtype (auto: the conv dtype)"),
    StateConvention("llama.cpp", 1, STAT, STAT,
                    "llama.cpp llama_hparams::n_embd_r = (d_conv - 1)*(d_inner + 2*n_group*d_state), n_embd_s = "
                    "d_state*d_inner; llama_model::create_memory makes both GGML_TYPE_F32"),
)}


def state_bytes(conv_channels: int, kernel: int, ssm_elements: int, e: int, convention: str = "transformers",
                ssm_e: int | None = None) -> dict[str, int]:
    """Bytes of one layer's decode state for one sequence: {'conv': kept positions * channels * bytes,
    'ssm': recurrent elements * bytes}. e: the model's element size; ssm_e: vLLM's mamba_ssm_cache_dtype size
    (None: auto, the conv dtype)."""
    c = CONVENTIONS[convention]
    ssm = c.ssm_bytes if c.ssm_bytes is not None else (ssm_e if ssm_e is not None else e)
    return {"conv": (kernel - c.conv_short) * conv_channels * (c.conv_bytes or e), "ssm": ssm_elements * ssm}
