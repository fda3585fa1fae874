"""Hand-written references of the recurrent mixers for tests/test_references.py: each kind's forward from its
formulas, token by token in float64 on the model's own weights (read by name), importing nothing from the engine.
A new mixer kind adds its reference here and its word to REF_MIXERS there."""
import math

import torch


def _linear(sd, name, x):
    y = x @ sd[name + ".weight"].T
    return y + sd[name + ".bias"] if name + ".bias" in sd else y


def gdn_reference(cfg, sd, name, x):
    """Gated DeltaNet token by token from the formulas: a short causal conv + SiLU over [q k v], L2-normed q/sqrt(dk)
    and k, per value head S <- exp(g) S; u = beta (v - S^T k); S <- S + k u^T; o = S^T q, then RMS-normed o times
    the gain and silu(z), and the out projection."""
    B, T, _ = x.shape
    nk = cfg.gdn_k_heads or cfg.n_heads
    dk = cfg.gdn_k_dim or cfg.head_width
    nv, dv, K = cfg.gdn_v_heads or nk, cfg.gdn_v_dim or dk, cfg.gdn_conv_kernel
    u = _linear(sd, name + ".in_proj_qkv", x)                 # [q | k | v]
    z, b, a = (_linear(sd, f"{name}.in_proj_{part}", x) for part in "zba")
    w = sd[name + ".conv1d.weight"][:, 0]                     # [channels, K]: tap j reads position t - (K-1) + j
    conv = torch.zeros_like(u)
    for t in range(T):
        for j in range(K):
            if t - (K - 1) + j >= 0:
                conv[:, t] += w[:, j] * u[:, t - (K - 1) + j]
    conv = conv * torch.sigmoid(conv)
    q, k, v = conv.split([nk * dk, nk * dk, nv * dv], -1)
    l2 = lambda t: t / torch.sqrt((t * t).sum(-1, keepdim=True) + 1e-6)  # noqa: E731
    q, k = l2(q.view(B, T, nk, dk)) / math.sqrt(dk), l2(k.view(B, T, nk, dk))
    v, z = v.view(B, T, nv, dv), z.view(B, T, nv, dv)
    beta = torch.sigmoid(b)
    g = -torch.exp(sd[name + ".A_log"]) * torch.log1p(torch.exp(a + sd[name + ".dt_bias"]))
    o = torch.zeros(B, T, nv, dv, dtype=x.dtype)
    for h in range(nv):
        kh = h // (nv // nk)                                  # value head h reads key head h // (nv/nk)
        S = torch.zeros(B, dk, dv, dtype=x.dtype)
        for t in range(T):
            S = S * torch.exp(g[:, t, h])[:, None, None]
            write = beta[:, t, h, None] * (v[:, t, h] - (S * k[:, t, kh, :, None]).sum(1))
            S = S + k[:, t, kh, :, None] * write[:, None, :]
            o[:, t, h] = (S * q[:, t, kh, :, None]).sum(1)
    o = o / torch.sqrt((o * o).mean(-1, keepdim=True) + cfg.norm_eps) * sd[name + ".norm_weight"]
    o = o * (z * torch.sigmoid(z))
    return _linear(sd, name + ".out_proj", o.reshape(B, T, nv * dv))
