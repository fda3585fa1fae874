"""Kimi Delta Attention's rule (Kimi Linear, 2025): the gated delta rule with a decay per key channel.

Per value head, with a state S [dk, dv], a log decay g_t [dk] (every entry <= 0) and a write strength beta_t:

    S <- diag(exp(g_t)) S;   u_t = beta_t (v_t - S^T k_t);   S <- S + k_t u_t^T;   o_t = S^T q_t

Gated DeltaNet (engine/layers/delta_rule.py) is the case of one g_t shared by every channel. Token by token
(decode) it is delta_rule.recurrent, which takes either decay. The chunked form (training, prefill) is delta_rule's
with the cumulative decay gamma [c, dk] per channel: the pairwise products of a chunk become

    M_ij = sum_d x_id k_jd exp(gamma_id - gamma_jd)   (j <= i)

for x = beta k (the system to solve) and x = q (the within-chunk scores). exp(gamma_id) and exp(-gamma_jd)
apart overflow for strong decays, so `pairwise` works in blocks of SUB tokens, as the FLA library's kernel does:
a block of rows against the earlier columns is one matrix product of two factors that are both <= 1 (both
decays measured from the position before the block), and the block against itself is an elementwise product
with exp(gamma_i - gamma_j) contracted by a batched product. Everything after the pairwise products (the
triangular solve, the chunk-by-chunk scan) is delta_rule's. Both forms take q, k already L2-normalized (q also
scaled) and compute in fp32, as transformers' torch fallbacks (chunk_kimi_delta_attention,
recurrent_kimi_delta_attention) do; tests/test_kda.py holds all three equal.

FLOPs (every matrix product, as FlopCounterMode counts them; elementwise work is not counted, as everywhere in
this engine) are in chunked_flops / chunked_backward_flops.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from engine.layers.delta_rule import _value_heads, chunk_size, scan_chunks, solve_flops

Tensor = torch.Tensor
SUB = 16   # tokens per block of the pairwise products (FLA's KDA kernel uses 16 inside chunks of 64)


def pairwise(x: Tensor, k: Tensor, gamma: Tensor, sub: int = SUB) -> Tensor:
    """M [..., c, c]: M_ij = sum_d x_id k_jd exp(gamma_id - gamma_jd) for j <= i, 0 above the diagonal;
    x, k, gamma [..., c, dk], gamma non-increasing along c in every channel."""
    c = x.shape[-2]
    rows = []
    for start in range(0, c, sub):
        end = min(start + sub, c)
        xs, gs = x[..., start:end, :], gamma[..., start:end, :]
        later = torch.ones(end - start, end - start, dtype=torch.bool, device=x.device).triu(1)
        decay = (gs[..., :, None, :] - gs[..., None, :, :]).masked_fill(later[..., None], -math.inf).exp()
        keys = (k[..., None, start:end, :] * decay).transpose(-1, -2)                # [..., s, dk, s]
        parts = [(xs[..., :, None, :] @ keys).squeeze(-2)]                           # the block itself
        if start:   # earlier columns, both decays measured from the position before the block
            ref = gamma[..., start - 1:start, :]
            left, right = xs * (gs - ref).exp(), k[..., :start, :] * (ref - gamma[..., :start, :]).exp()
            parts.insert(0, left @ right.transpose(-1, -2))
        if end < c:
            parts.append(x.new_zeros(*xs.shape[:-1], c - end))
        rows.append(torch.cat(parts, dim=-1))
    return torch.cat(rows, dim=-2)


def chunked(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, chunk: int,
            state: Tensor | None = None, want_state: bool = False) -> tuple[Tensor, Tensor | None]:
    """q, k [B, nk, T, dk], v [B, H, T, dv], g [B, H, T, dk], beta [B, H, T] (fp32), state [B, H, dk, dv] or None
    -> (o [B, T, H, dv] contiguous, the state after the last token, or None unless want_state)."""
    B, H, T, dv = v.shape
    q, k = _value_heads(q, k, H)
    dk = k.shape[-1]
    c = chunk_size(T, chunk)
    pad = -T % c
    if pad:   # zero rows at the end: k = 0 writes nothing, g = 0 keeps the state, and their outputs are dropped
        q, k, v, g = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v, g))
        beta = F.pad(beta, (0, pad))
    n = (T + pad) // c
    q, k, v, g = (x.reshape(B, H, n, c, x.shape[-1]) for x in (q, k, v, g))
    gamma = g.cumsum(-2)                                              # cumulative log decay, per channel
    kb = k * beta.reshape(B, H, n, c, 1)
    system = pairwise(kb, k, gamma)             # unit lower-triangular: its diagonal is never read
    rhs = torch.cat([v * beta.reshape(B, H, n, c, 1), kb * gamma.exp()], dim=-1)
    w = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)
    attn = pairwise(q, k, gamma)                                      # within-chunk scores, the diagonal included
    k_end = k * (gamma[..., -1:, :] - gamma).exp()                    # writes decayed to the chunk's end
    chunk_decay = gamma[..., -1, :].exp()[..., None]                  # [B, H, n, dk, 1]
    return scan_chunks(w[..., :dv], w[..., dv:], attn, q * gamma.exp(), k_end, chunk_decay, state, want_state, T)


# ---- FLOPs, per sequence and value head, counted as FlopCounterMode counts each product ----------------------
def pairwise_flops(c: int, dk: int, sub: int = SUB) -> int:
    """One `pairwise` of a c-token chunk: rows start..end against columns 0..end, 2 dk per entry (the block
    against itself as a batched product, the earlier columns as one matrix product)."""
    return sum(2 * (min(start + sub, c) - start) * min(start + sub, c) * dk for start in range(0, c, sub))


def chunked_flops(seq: int, chunk: int, dk: int, dv: int, initial: bool = False, final: bool = False) -> int:
    """FLOPs of `chunked` for one value head of one sequence: per chunk the two pairwise products, the solve
    (dk + dv right-hand sides) and attn @ U (2 c^2 dv); 2 c dk dv for each state product: W_k S and Q S when a
    state is there to read, K^T U when the next state is needed."""
    c = chunk_size(seq, chunk)
    n = -(-seq // c)
    per_chunk = 2 * pairwise_flops(c, dk) + solve_flops(c, dk + dv) + 2 * c * c * dv
    reads = 2 * (n if initial else n - 1)
    writes = n - 1 + int(final)
    return n * per_chunk + (reads + writes) * 2 * c * dk * dv


def chunked_backward_flops(seq: int, chunk: int, dk: int, dv: int) -> int:
    """Backward of delta_rule.chunked_train with this rule: `chunked` once more (the recompute), then 2x each
    product (both operands' gradients) except the solve, whose backward is one more solve and one c x c product
    per right-hand side column, 2 c^2 (dk + dv) per chunk (torch's linalg_solve_triangular backward)."""
    c = chunk_size(seq, chunk)
    n = -(-seq // c)
    forward = chunked_flops(seq, chunk, dk, dv)
    solves = n * solve_flops(c, dk + dv)
    return forward + 2 * (forward - solves) + solves + n * 2 * c * c * (dk + dv)
