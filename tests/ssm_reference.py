"""Hand-written Mamba-2 and Mamba-1 layers for tests/test_references.py: token by token from the formulas in
the config's help texts, plain torch on the model's own weights (read by name from its state dict), nothing
from engine/layers. Every loop is the recurrence itself (h_t = decay * h_{t-1} + input), never the chunked form,
so a chunking error cannot hide in both."""
import torch

SSM_GATES = ("norm_gated", "gate_normed", "gate")   # where silu(z) meets the grouped RMSNorm (ssm_gate)


def _linear(sd, name, x):
    y = x @ sd[name + ".weight"].T
    return y + sd[name + ".bias"] if name + ".bias" in sd else y


def _silu(x):
    return x / (1 + torch.exp(-x))


def _softplus(x):
    return torch.log1p(torch.exp(x))


def _causal_conv(sd, name, u):
    """Depthwise causal conv: tap j of channel c reads position t - (K-1) + j (zeros before the start), + bias."""
    w = sd[name + ".weight"][:, 0]                             # [channels, K]
    K = w.shape[1]
    out = torch.zeros_like(u) + (sd[name + ".bias"] if name + ".bias" in sd else 0)
    for t in range(u.shape[1]):
        for j in range(K):
            if t - (K - 1) + j >= 0:
                out[:, t] += w[:, j] * u[:, t - (K - 1) + j]
    return _silu(out)


def _group_rms(cfg, y, groups, weight):
    g = y.view(*y.shape[:-1], groups, -1)
    g = g / torch.sqrt((g * g).mean(-1, keepdim=True) + cfg.norm_eps)
    return g.reshape(y.shape) * weight


def mamba2(cfg, sd, name, x):
    """z, xBC, dt = in_proj(x * in_scale) (times the five projection scales); x, B, C = silu(conv(xBC));
    dt = clamp(softplus(dt + dt_bias)); per head h <- exp(dt A) h + dt x B^T (B, C of the head's group),
    y = h C + D x; then the gate and grouped RMSNorm as ssm_gate says, out_proj, times ssm_out_scale."""
    B, T, d = x.shape
    P, N, G = cfg.ssm_head_dim, cfg.ssm_state, cfg.ssm_groups
    H = cfg.ssm_heads if cfg.ssm_heads is not None else max(1, 2 * d // P)
    din = H * P
    zxbcdt = _linear(sd, name + ".in_proj", x * cfg.ssm_in_scale)
    widths = [din, din, G * N, G * N, H]
    parts = list(zxbcdt.split(widths, -1))
    if cfg.ssm_proj_scales is not None:
        parts = [p * s for p, s in zip(parts, cfg.ssm_proj_scales)]
    z, xs, Bm, Cm, dt = parts
    xs, Bm, Cm = _causal_conv(sd, name + ".conv1d", torch.cat([xs, Bm, Cm], -1)).split([din, G * N, G * N], -1)
    dt = _softplus(dt + sd[name + ".dt_bias"]).clamp(min=cfg.ssm_dt_min)
    if cfg.ssm_dt_max is not None:
        dt = dt.clamp(max=cfg.ssm_dt_max)
    A = -torch.exp(sd[name + ".A_log"])
    xs, Bm, Cm = xs.view(B, T, H, P), Bm.view(B, T, G, N), Cm.view(B, T, G, N)
    y = torch.zeros(B, T, H, P, dtype=x.dtype)
    for h in range(H):
        g = h // (H // G)                                      # the head's group
        state = torch.zeros(B, P, N, dtype=x.dtype)
        for t in range(T):
            state = torch.exp(dt[:, t, h] * A[h])[:, None, None] * state \
                + (dt[:, t, h, None] * xs[:, t, h])[:, :, None] * Bm[:, t, g, None, :]
            y[:, t, h] = (state * Cm[:, t, g, None, :]).sum(-1) + sd[name + ".D"][h] * xs[:, t, h]
    y = y.reshape(B, T, din)
    if cfg.ssm_gate == "gate":
        y = y * _silu(z)
    elif cfg.ssm_gate == "norm_gated":
        y = _group_rms(cfg, y * _silu(z), G, sd[name + ".norm.weight"])
    else:
        y = _group_rms(cfg, y, G, sd[name + ".norm.weight"]) * _silu(z)
    return _linear(sd, name + ".out_proj", y) * cfg.ssm_out_scale


def mamba1(cfg, sd, name, x):
    """x, z = in_proj(x); x = silu(conv(x)); dt_r, B, C = x_proj(x) (RMS-normed with ssm_dt_norm);
    dt = softplus(dt_proj(dt_r)); per channel c and state n: h <- exp(dt_c A_cn) h + dt_c x_c B_n,
    y_c = sum_n h C_n + D_c x_c; out_proj(y * silu(z))."""
    B, T, d = x.shape
    D = cfg.ssm_inner if cfg.ssm_inner is not None else 2 * d
    N = cfg.ssm_state
    R = cfg.ssm_dt_rank if cfg.ssm_dt_rank is not None else -(-d // 16)
    xs, z = _linear(sd, name + ".in_proj", x).split([D, D], -1)
    xs = _causal_conv(sd, name + ".conv1d", xs)
    dt, Bm, Cm = _linear(sd, name + ".x_proj", xs).split([R, N, N], -1)
    if cfg.ssm_dt_norm:
        rms = lambda t, n: t / torch.sqrt((t * t).mean(-1, keepdim=True) + cfg.norm_eps) * sd[f"{name}.{n}.weight"]  # noqa: E731
        dt, Bm, Cm = rms(dt, "dt_norm"), rms(Bm, "b_norm"), rms(Cm, "c_norm")
    dt = _softplus(_linear(sd, name + ".dt_proj", dt))
    A = -torch.exp(sd[name + ".A_log"])                        # [D, N]
    state = torch.zeros(B, D, N, dtype=x.dtype)
    y = torch.zeros(B, T, D, dtype=x.dtype)
    for t in range(T):
        state = torch.exp(dt[:, t, :, None] * A) * state + (dt[:, t] * xs[:, t])[:, :, None] * Bm[:, t, None, :]
        y[:, t] = (state * Cm[:, t, None, :]).sum(-1) + sd[name + ".D"] * xs[:, t]
    return _linear(sd, name + ".out_proj", y * _silu(z))
