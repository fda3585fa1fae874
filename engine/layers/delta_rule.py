"""The gated delta rule (Gated DeltaNet, Yang et al. 2024) in two equal forms, pure torch, no custom kernel.

Per head, with a state S [dk, dv], a decay g_t <= 0 (log space) and a write strength beta_t in (0, 1):

    S <- exp(g_t) S;   u_t = beta_t (v_t - S^T k_t);   S <- S + k_t u_t^T;   o_t = S^T q_t

`recurrent` runs that loop token by token (decode: one step per new token). `chunked` runs it c tokens at a
time (training and prefill): inside a chunk the writes u solve one unit lower-triangular system,
(I + A) U = beta V - beta exp(gamma) K S0 with A_ij = beta_i exp(gamma_i - gamma_j) k_i.k_j (j < i) and gamma
the cumulative decay inside the chunk, so U = W_v - W_k S0 where W_v, W_k do not depend on the state and are
solved for all chunks at once; only three products per chunk (W_k S0, Q S0, K^T U) wait for the previous
chunk. Outputs O = exp(gamma) Q S0 + (Q K^T * decay) U; the next state exp(gamma_c) S0 + (K decayed to the chunk
end)^T U. Both forms take q, k already L2-normalized (q also scaled), nk heads each serving nv/nk value heads,
and compute in fp32, as transformers' torch fallbacks do; a product with a zero state (no initial state) is
skipped, as is the last state when nobody reads it.

Training (`chunked_train`) keeps only the inputs q, k, v, g, beta (and an initial state) for backward and runs
`chunked` again there, as the FLA library's chunk kernel recomputes its chunk quantities: the [c, c] matrices
of every chunk are never kept, so the activation bytes are those of the inputs (gdn.py gdn_saved_bytes).

FLOPs (every product above, per head; FlopCounterMode sees the matmuls, `solve_flops` is the triangular
solve's count, registered with it in engine/measure/flops.py) are in chunked_flops / recurrent_flops.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def l2_normalize(x: Tensor, eps: float = 1e-6) -> Tensor:
    """x / sqrt(sum(x^2) + eps) over the last dimension (the FLA library's and transformers' l2norm)."""
    return x * torch.rsqrt(x.square().sum(-1, keepdim=True) + eps)


def chunk_size(seq: int, chunk: int) -> int:
    """The chunk the chunked form uses: `chunk`, or the whole sequence when it is shorter (no padding waste)."""
    return min(chunk, seq)


def _value_heads(q: Tensor, k: Tensor, heads: int) -> tuple[Tensor, Tensor]:
    """[B, nk, T, dk] -> [B, nv, T, dk]: key head j serves value heads j*r ... j*r + r - 1 (r = nv/nk)."""
    group = heads // k.shape[1]
    return (q, k) if group == 1 else (q.repeat_interleave(group, dim=1), k.repeat_interleave(group, dim=1))


def chunked(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, chunk: int,
            state: Tensor | None = None, want_state: bool = False) -> tuple[Tensor, Tensor | None]:
    """q, k [B, nk, T, dk], v [B, H, T, dv], g, beta [B, H, T] (fp32), state [B, H, dk, dv] or None ->
    (o [B, T, H, dv] contiguous, the state after the last token, or None unless want_state)."""
    B, H, T, dv = v.shape
    q, k = _value_heads(q, k, H)
    dk = k.shape[-1]
    c = chunk_size(T, chunk)
    pad = -T % c
    if pad:   # zero rows at the end: k = 0 writes nothing, and their outputs are dropped
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    n = (T + pad) // c
    q, k, v = (x.reshape(B, H, n, c, x.shape[-1]) for x in (q, k, v))
    gamma = g.reshape(B, H, n, c).cumsum(-1)                          # cumulative log decay in each chunk
    later = torch.ones(c, c, dtype=torch.bool, device=q.device).triu(1)
    decay = (gamma[..., :, None] - gamma[..., None, :]).masked_fill(later, -math.inf).exp()   # [B,H,n,c,c]
    kb = k * beta.reshape(B, H, n, c, 1)
    system = (kb @ k.transpose(-1, -2)) * decay       # unit lower-triangular: its diagonal is never read
    rhs = torch.cat([v * beta.reshape(B, H, n, c, 1), kb * gamma.exp()[..., None]], dim=-1)
    w = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)
    w_v, w_k = w[..., :dv], w[..., dv:]
    attn = (q @ k.transpose(-1, -2)) * decay          # within-chunk scores, the diagonal included
    q_start = q * gamma.exp()[..., None]              # reads the state the chunk starts from
    k_end = k * (gamma[..., -1:] - gamma).exp()[..., None]   # writes decayed to the chunk's end
    chunk_decay = gamma[..., -1].exp()[..., None, None]       # [B, H, n, 1, 1]
    return scan_chunks(w_v, w_k, attn, q_start, k_end, chunk_decay, state, want_state, T)


def scan_chunks(w_v: Tensor, w_k: Tensor, attn: Tensor, q_start: Tensor, k_end: Tensor, chunk_decay: Tensor,
                state: Tensor | None, want_state: bool, T: int) -> tuple[Tensor, Tensor | None]:
    """The part of the chunked form that waits for the previous chunk, chunk by chunk (Gated DeltaNet's and
    KDA's alike): U = W_v - W_k S, O = attn U + Q_start S, then S <- decay S + K_end^T U. Inputs [B, H, n, c, .]
    (chunk_decay [B, H, n, 1 or dk, 1]) -> (o [B, T, H, dv] contiguous, the final state or None)."""
    B, H, n, c, dv = w_v.shape
    outs = []
    for i in range(n):
        u = w_v[:, :, i] if state is None else w_v[:, :, i] - w_k[:, :, i] @ state
        o = attn[:, :, i] @ u
        outs.append(o if state is None else o + q_start[:, :, i] @ state)
        if i < n - 1 or want_state:
            write = k_end[:, :, i].transpose(-1, -2) @ u
            state = write if state is None else state * chunk_decay[:, :, i] + write
    o = torch.stack(outs, dim=2).reshape(B, H, n * c, dv)[:, :, :T]
    return o.transpose(1, 2).contiguous(), (state if want_state else None)


class _ChunkedRecompute(torch.autograd.Function):
    """A chunked form (`rule`: `chunked`, or another kind's of the same signature, as KDA's) that keeps only its
    inputs for backward and runs itself again there (FLA's trade)."""

    @staticmethod
    def forward(ctx, rule, q, k, v, g, beta, state, chunk, want_state):
        ctx.save_for_backward(q, k, v, g, beta, state)
        ctx.rule, ctx.chunk, ctx.want_state = rule, chunk, want_state
        return rule(q, k, v, g, beta, chunk, state, want_state)

    @staticmethod
    def backward(ctx, grad_o, grad_state):
        inputs = [None if t is None else t.detach().requires_grad_(need)
                  for t, need in zip(ctx.saved_tensors, ctx.needs_input_grad[1:])]
        with torch.enable_grad():
            o, state = ctx.rule(*inputs[:5], ctx.chunk, inputs[5], ctx.want_state)
        outs, grads = [o], [grad_o]
        if state is not None and grad_state is not None:
            outs.append(state)
            grads.append(grad_state)
        wanted = [t for t in inputs if t is not None and t.requires_grad]
        found = iter(torch.autograd.grad(outs, wanted, grads, allow_unused=True))
        return (None, *(next(found) if t is not None and t.requires_grad else None for t in inputs), None, None)


def chunked_train(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor | None, chunk: int,
                  state: Tensor | None = None, want_state: bool = False,
                  rule: Callable[..., tuple[Tensor, Tensor | None]] | None = None) -> tuple[Tensor, Tensor | None]:
    """`rule` (default `chunked`), keeping only its inputs for backward when autograd records (else `rule`
    itself)."""
    rule = rule or chunked
    recording = torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                                 for t in (q, k, v, g, beta, state))
    if not recording:
        return rule(q, k, v, g, beta, chunk, state, want_state)
    return _ChunkedRecompute.apply(rule, q, k, v, g, beta, state, chunk, want_state)


def recurrent(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
              state: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The same rule token by token (decode); shapes as `chunked`, or g [B, H, T, dk] (a decay per key channel:
    KDA, engine/layers/kda_rule.py); always returns the final state."""
    B, H, T, dv = v.shape
    q, k = _value_heads(q, k, H)
    if state is None:
        state = torch.zeros(B, H, k.shape[-1], dv, dtype=v.dtype, device=v.device)
    outs = []
    for t in range(T):
        state = state * g[:, :, t].exp().reshape(B, H, -1, 1)       # one decay per head, or per key row
        read = k[:, :, t, None, :] @ state                          # [B, H, 1, dv]: what S predicts for k_t
        u = (v[:, :, t, None, :] - read) * beta[:, :, t, None, None]
        state = state + k[:, :, t, :, None] @ u                     # the outer product k_t u_t^T
        outs.append(q[:, :, t, None, :] @ state)
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), state


# ---- FLOPs, per sequence and head, counted as FlopCounterMode counts each product (2 per multiply-add) ----
def solve_flops(c: int, columns: int) -> int:
    """A unit lower-triangular c x c solve with `columns` right-hand sides: each of the c(c-1)/2 entries below
    the diagonal is one multiply-add per column (forward substitution), 2 FLOPs each."""
    return c * (c - 1) * columns


def chunked_flops(seq: int, chunk: int, dk: int, dv: int, initial: bool = False, final: bool = False) -> int:
    """FLOPs of `chunked` for one value head of one sequence: per chunk K_b K^T and Q K^T (2 c^2 dk each), the
    solve (dk + dv right-hand sides), attn @ U (2 c^2 dv), and 2 c dk dv for each state product: W_k S and
    Q S when a state is there to read, K^T U when the next state is needed."""
    c = chunk_size(seq, chunk)
    n = -(-seq // c)
    per_chunk = 2 * 2 * c * c * dk + solve_flops(c, dk + dv) + 2 * c * c * dv
    reads = 2 * (n if initial else n - 1)
    writes = n - 1 + int(final)
    return n * per_chunk + (reads + writes) * 2 * c * dk * dv


def chunked_backward_flops(seq: int, chunk: int, dk: int, dv: int, initial: bool = False) -> int:
    """Backward of `chunked_train` for one value head: `chunked` once more (the recompute), then 2x each
    product (both operands' gradients) except the solve, whose backward is one more solve and one c x c
    product per right-hand side column, 2 c^2 (dk + dv) per chunk (torch's linalg_solve_triangular backward)."""
    c = chunk_size(seq, chunk)
    n = -(-seq // c)
    forward = chunked_flops(seq, chunk, dk, dv, initial)
    solves = n * solve_flops(c, dk + dv)
    return forward + 2 * (forward - solves) + solves + n * 2 * c * c * (dk + dv)


def recurrent_flops(seq: int, dk: int, dv: int) -> int:
    """FLOPs of `recurrent` for one value head: three products of 2 dk dv per token (read, write, output); the
    decay and the subtraction are elementwise (not counted, as everywhere in this engine)."""
    return seq * 3 * 2 * dk * dv
