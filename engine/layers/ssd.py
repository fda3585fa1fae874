"""The SSD scan of Mamba-2 (Dao & Gu 2024) in two equal forms, pure torch (fp32 for fp32/bf16 models).

Per head, with a state h [P, N], a decay exp(dt A) (one number per head and token) and B, C shared by the heads
of a group:    h_t = exp(dt_t A) h_{t-1} + (dt_t x_t) B_t^T;    y_t = h_t C_t

`ssd_chunked` (training and prefill) runs chunks of Q tokens at once: inside a chunk the product
(C B^T masked by the decays between positions) times dt x, as attention would; between chunks only the state
entering each chunk is carried forward (T/Q steps). `ssd_step` is one decode token. engine/layers/mamba2.py
builds the layer around them and holds the closed forms, their FLOPs included.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def ssd_chunked(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, chunk: int,
                h0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The scan over a sequence in chunks (fp32). x [b, T, H, P], dt [b, T, H], A [H], B, C [b, T, G, N], h0
    [b, H, P, N] or None -> y [b, T, H, P] (without D x) and the final state [b, H, P, N].
    Per chunk of Q tokens: y_diag = (C B^T * exp(cumA_i - cumA_j), j <= i) (dt x), the chunk's own end state
    S = sum_j exp(cumA_Q - cumA_j) (dt x)_j B_j^T, then the state entering each chunk carried from chunk to chunk,
    read by y_off = exp(cumA_i) C_i h_in. Zero padding to whole chunks has dt = 0: no decay, no input."""
    b, T, H, P = x.shape
    G, N, Q = B.shape[2], B.shape[3], chunk
    R, pad = H // G, (-T) % chunk
    if pad:
        x, dt, B, C = (F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)) for t in (x, dt, B, C))
    c = (T + pad) // Q
    a = (dt * A).view(b, c, Q, G, R).permute(0, 1, 3, 4, 2)                  # [b, c, G, R, Q]
    acum = a.cumsum(-1)
    xdt = (x * dt[..., None]).view(b, c, Q, G, R, P).permute(0, 1, 3, 4, 2, 5)   # [b, c, G, R, Q, P]
    Bc = B.view(b, c, Q, G, N).transpose(2, 3)                              # [b, c, G, Q, N]
    Cc = C.view(b, c, Q, G, N).transpose(2, 3)
    causal = torch.ones(Q, Q, dtype=torch.bool, device=x.device).tril()
    decay = (acum[..., :, None] - acum[..., None, :]).masked_fill_(~causal, -math.inf).exp_()  # [b, c, G, R, Q, Q]
    y = ((Cc @ Bc.transpose(-1, -2))[:, :, :, None] * decay) @ xdt         # [b, c, G, R, Q, P]
    to_end = (acum[..., -1:] - acum).exp()[..., None]                       # [b, c, G, R, Q, 1]
    ends = (xdt * to_end).permute(0, 1, 2, 4, 3, 5).reshape(b, c, G, Q, R * P).transpose(-1, -2) @ Bc
    ends = ends.view(b, c, G, R, P, N)
    h = x.new_zeros(b, G, R, P, N) if h0 is None else h0.to(x.dtype).view(b, G, R, P, N)
    carry = acum[..., -1].exp()[..., None, None]                            # [b, c, G, R, 1, 1]
    entering = []
    for i in range(c):
        entering.append(h)
        h = carry[:, i] * h + ends[:, i]
    h_in = torch.stack(entering, 1).permute(0, 1, 2, 5, 3, 4).reshape(b, c, G, N, R * P)
    y_off = (Cc @ h_in).view(b, c, G, Q, R, P).transpose(3, 4) * acum.exp()[..., None]
    y = (y + y_off).permute(0, 1, 4, 2, 3, 5).reshape(b, c * Q, H, P)
    return y[:, :T], h.view(b, H, P, N)


def ssd_step(h: torch.Tensor, x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
             C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token (fp32): h [b, H, P, N], x [b, H, P], dt [b, H], B, C [b, G, N] -> y [b, H, P] (without D x) and
    the new state. h' = exp(dt A) h + (dt x) B^T;  y = h' C."""
    R = h.shape[1] // B.shape[1]
    Bh, Ch = B.repeat_interleave(R, 1), C.repeat_interleave(R, 1)          # [b, H, N]
    h = h * (dt * A).exp()[..., None, None] + (x * dt[..., None])[..., None] * Bh[:, :, None]
    return (h @ Ch[..., None]).squeeze(-1), h


def chunked_products(T: int, chunk: int, groups: int, state: int, heads: int, head_dim: int) -> tuple[int, ...]:
    """FLOPs of ssd_chunked's four products over one sequence of T tokens, padded to c chunks of Q, as
    FlopCounterMode counts them: C B^T per group 2*Q*Q*N*G, the masked scores times dt x 2*Q*Q*P*H, the chunks'
    end states 2*P*Q*N*H, the entering states read by C 2*Q*N*P*H (per chunk); and c. The decay masks,
    exponentials and the carry between chunks are elementwise and not counted."""
    Q, G, N, H, P = chunk, groups, state, heads, head_dim
    c = -(-T // Q)
    return 2 * c * Q * Q * N * G, 2 * c * Q * Q * P * H, 2 * c * P * Q * N * H, 2 * c * Q * N * P * H, c


def step_flops(heads: int, head_dim: int, state: int) -> int:
    """ssd_step counted by hand (one FLOP per elementwise multiply, add or exp; 2 per multiply-add of the read),
    for d_in = H*P channels of N states each: dt*A and its exp 2H; dt*x d_in; h*exp(dtA), (dt x) B^T and their
    sum 3*d_in*N; h C 2*d_in*N:  5*d_in*N + d_in + 2H, whatever the context length."""
    d_in = heads * head_dim
    return 5 * d_in * state + d_in + 2 * heads
