"""RoPE pairing conventions: checkpoints written for the interleaved pairing (dims 2i and 2i+1 rotate together:
Meta's original Llama, GPT-J, DeepSeek, Cohere) hold their q/k rows in another order than our rotate-half pairing
(dims i and i + r/2); these reorder them, exactly and invertibly."""
from __future__ import annotations

import torch

Tensor = torch.Tensor


def _half_order(head_dim: int, rotary_dim: int) -> Tensor:
    return torch.cat([torch.arange(0, rotary_dim, 2), torch.arange(1, rotary_dim, 2),
                      torch.arange(rotary_dim, head_dim)])


def rope_interleaved_to_half(w: Tensor, n_heads: int, rotary_dim: int | None = None) -> Tensor:
    """Reorder the rows of a q or k projection (weight [heads*hd, in] or bias [heads*hd]) written for the
    interleaved pairing (dims 2i and 2i+1 rotate together: Meta's original Llama, GPT-J) into our rotate-half
    pairing (dims i and i + r/2). Scores q.k are unchanged because q and k get the same permutation."""
    hd = w.shape[0] // n_heads
    order = _half_order(hd, rotary_dim or hd)
    return w.reshape(n_heads, hd, *w.shape[1:])[:, order].reshape(w.shape)


def rope_half_to_interleaved(w: Tensor, n_heads: int, rotary_dim: int | None = None) -> Tensor:
    """The inverse of rope_interleaved_to_half."""
    hd = w.shape[0] // n_heads
    order = torch.argsort(_half_order(hd, rotary_dim or hd))
    return w.reshape(n_heads, hd, *w.shape[1:])[:, order].reshape(w.shape)
