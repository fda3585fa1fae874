"""Which keys a query sees in one attention layer: its span.

A span is None (full causal attention: every earlier key and itself), an int w (a sliding window: keys
i - w < j <= i) or a Chunk(C) (Llama 4's chunked local attention: keys j <= i in the same block of C positions,
j // C == i // C, so the first query of every block sees only itself). The attention module masks with
`visible`; the budgets count with the closed forms below (query-key pairs for FLOPs, keys a query reads while
decoding, keys a layer's cache holds), so the mask and the counts come from one definition.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Chunk:
    """Chunked local attention over blocks of `size` positions (Llama 4: attention_chunk_size 8192)."""
    size: int

    def __str__(self) -> str:
        return f"chunks of {self.size:,}"


Span = int | Chunk | None


def visible(q_pos: torch.Tensor, k_pos: torch.Tensor, span: Span) -> torch.Tensor:
    """Bool [Tq, Tk]: key j is visible to query i iff j <= i and j lies in i's window or chunk."""
    d = q_pos[:, None] - k_pos[None, :]
    ok = d >= 0
    if isinstance(span, Chunk):
        return ok & (q_pos[:, None] // span.size == k_pos[None, :] // span.size)
    return ok & (d < span) if span is not None else ok


def cache_keep(span: Span) -> int | None:
    """The most keys a layer's cache must keep: a window's w, a chunk's C (the keys of the current block, at
    most C; the block's start is masked by position), None for full attention."""
    return span.size if isinstance(span, Chunk) else span


def keys_held(tokens: int, span: Span) -> int:
    """Keys a layer's cache holds after `tokens` positions: all of them, or at most cache_keep(span)."""
    keep = cache_keep(span)
    return tokens if keep is None else min(tokens, keep)


def keys_seen(position: int, span: Span) -> int:
    """Keys the query at 0-based `position` attends to: position + 1, at most w in a window, and in a chunk only
    the ones of its own block, position mod C + 1."""
    if isinstance(span, Chunk):
        return position % span.size + 1
    return position + 1 if span is None else min(position + 1, span)


def query_key_pairs(seq: int, span: Span, causal: bool) -> int:
    """Query-key pairs of one sequence in one layer: T^2 (the full square), or, causal, the visible ones:
    T(T+1)/2; with a window w < T, w(w+1)/2 + (T-w)*w; with chunks of C, q = T // C full blocks of C(C+1)/2
    pairs and a last block of r = T mod C queries, r(r+1)/2."""
    if not causal:
        return seq * seq
    if isinstance(span, Chunk):
        full, rest = divmod(seq, span.size)
        return full * span.size * (span.size + 1) // 2 + rest * (rest + 1) // 2
    if span is None or span >= seq:
        return seq * (seq + 1) // 2
    return span * (span + 1) // 2 + (seq - span) * span
