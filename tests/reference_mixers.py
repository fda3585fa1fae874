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
    z, b, a = (_linear(sd, f"{name}.in_proj_{part}", x) for part in "zba")
    conv = _short_conv_silu(sd, name, _linear(sd, name + ".in_proj_qkv", x), K)   # over [q | k | v]
    q, k, v = conv.split([nk * dk, nk * dk, nv * dv], -1)
    q, k = _l2(q.view(B, T, nk, dk)) / math.sqrt(dk), _l2(k.view(B, T, nk, dk))
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


def _l2(t):
    return t / torch.sqrt((t * t).sum(-1, keepdim=True) + 1e-6)


def _short_conv_silu(sd, name, u, K):
    """SiLU of a causal depthwise conv: output t of channel c is sum_j w[c, j] u[t - (K-1) + j, c]."""
    w = sd[name + ".conv1d.weight"][:, 0]                     # [channels, K]: tap j reads position t - (K-1) + j
    conv = torch.zeros_like(u)
    for t in range(u.shape[1]):
        for j in range(K):
            if t - (K - 1) + j >= 0:
                conv[:, t] += w[:, j] * u[:, t - (K - 1) + j]
    return conv * torch.sigmoid(conv)


def kda_reference(cfg, sd, name, x):
    """Kimi Delta Attention token by token: the short conv + SiLU over [q | k | v], L2-normed q/sqrt(dk) and k; a
    log decay per value head and key channel g = -exp(A_log) softplus(x W_fa W_fb + dt_bias), beta = sigmoid(x W_b);
    S <- diag(exp(g)) S; u = beta (v - S^T k); S <- S + k u^T; o = S^T q; then RMS-normed o times the gain and
    sigmoid(x W_ga W_gb), and o_proj."""
    B, T, _ = x.shape
    nk, dk = cfg.gdn_k_heads or cfg.n_heads, cfg.gdn_k_dim or cfg.head_width
    nv, dv = cfg.gdn_v_heads or nk, cfg.gdn_v_dim or dk
    u = torch.cat([_linear(sd, f"{name}.{p}_proj", x) for p in "qkv"], -1)
    q, k, v = _short_conv_silu(sd, name, u, cfg.gdn_conv_kernel).split([nk * dk, nk * dk, nv * dv], -1)
    q, k, v = _l2(q.view(B, T, nk, dk)) / math.sqrt(dk), _l2(k.view(B, T, nk, dk)), v.view(B, T, nv, dv)
    f = _linear(sd, name + ".f_b_proj", _linear(sd, name + ".f_a_proj", x)) + sd[name + ".dt_bias"]
    g = (-torch.exp(sd[name + ".A_log"])[:, None] * torch.log1p(torch.exp(f)).view(B, T, nv, dk))
    beta = torch.sigmoid(_linear(sd, name + ".b_proj", x))
    o = torch.zeros(B, T, nv, dv, dtype=x.dtype)
    for h in range(nv):
        kh = h // (nv // nk)
        S = torch.zeros(B, dk, dv, dtype=x.dtype)
        for t in range(T):
            S = S * torch.exp(g[:, t, h])[:, :, None]            # row i of S decays by channel i's gate
            write = beta[:, t, h, None] * (v[:, t, h] - (S * k[:, t, kh, :, None]).sum(1))
            S = S + k[:, t, kh, :, None] * write[:, None, :]
            o[:, t, h] = (S * q[:, t, kh, :, None]).sum(1)
    gate = _linear(sd, name + ".g_b_proj", _linear(sd, name + ".g_a_proj", x)).view(B, T, nv, dv)
    o = o / torch.sqrt((o * o).mean(-1, keepdim=True) + cfg.norm_eps) * sd[name + ".norm_weight"]
    return _linear(sd, name + ".o_proj", (o * torch.sigmoid(gate)).reshape(B, T, nv * dv))


def lightning_reference(cfg, sd, name, x):
    """Lightning attention token by token: per head [q | k | v] = silu(x W_qkv); S <- exp(-s_h) S + k^T v, o = q S
    with the layer's rates s (the `slope` buffer); RMSNorm over all heads (eps 1e-6) times the gain, times
    sigmoid(x W_gate), then out_proj."""
    B, T, _ = x.shape
    H, dh = cfg.n_heads, cfg.head_width
    qkv = _linear(sd, name + ".qkv_proj", x)
    qkv = (qkv * torch.sigmoid(qkv)).view(B, T, H, 3, dh)
    o = torch.zeros(B, T, H, dh, dtype=x.dtype)
    for h in range(H):
        S = torch.zeros(B, dh, dh, dtype=x.dtype)
        for t in range(T):
            q, k, v = qkv[:, t, h, 0], qkv[:, t, h, 1], qkv[:, t, h, 2]
            S = torch.exp(-sd[name + ".slope"][h]) * S + k[:, :, None] * v[:, None, :]
            o[:, t, h] = (q[:, :, None] * S).sum(1)
    o = o.reshape(B, T, H * dh)
    o = o / torch.sqrt((o * o).mean(-1, keepdim=True) + 1e-6) * sd[name + ".norm_weight"]
    return _linear(sd, name + ".out_proj", torch.sigmoid(_linear(sd, name + ".output_gate", x)) * o)
