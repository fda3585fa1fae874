"""The hand-written FFN and MoE forward of tests/test_references.py: every activation, gate, router and group
score from its formula, in float64 (tests/test_references.py holds the model against it)."""
import math

import torch

ROOT2, C = math.sqrt(2.0), math.sqrt(2.0 / math.pi)
REF_ACT = {"relu": lambda x: x.clamp_min(0),
           "gelu": lambda x: 0.5 * x * (1 + torch.erf(x / ROOT2)),
           "gelu_tanh": lambda x: 0.5 * x * (1 + torch.tanh(C * (x + 0.044715 * x ** 3))),
           "silu": lambda x: x / (1 + torch.exp(-x)), "relu2": lambda x: x.clamp_min(0) ** 2}
REF_GATE = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh", "reglu": "relu"}
REF_CLAMPED = ("swiglu_clamped",)   # gpt-oss: g' = min(g, L), u' = clamp(u, -L, L); g' sigmoid(alpha g') (u' + 1)
REF_ROUTERS = ("softmax_topk", "topk_softmax", "sigmoid")
REF_GROUP_SCORES = {"top2_sum": lambda s: sum(sorted(s)[-2:]), "max": max}   # a group's score from its experts'


def _linear(sd, name, x):
    y = x @ sd[name + ".weight"].T
    return y + sd[name + ".bias"] if name + ".bias" in sd else y


def _gated(cfg, g, u):
    g = g * cfg.ffn_gate_scale                                # act(s g) u (Falcon-H1's gate multiplier)
    if cfg.ffn in REF_CLAMPED:
        lim = cfg.swiglu_limit
        g, u = torch.where(g > lim, lim, g), torch.where(u > lim, lim, torch.where(u < -lim, -lim, u))
        return g / (1 + torch.exp(-cfg.swiglu_alpha * g)) * (u + 1)
    return REF_ACT[REF_GATE[cfg.ffn]](g) * u


def _ffn(cfg, sd, name, x):
    if cfg.ffn in REF_GATE or cfg.ffn in REF_CLAMPED:
        h = _gated(cfg, _linear(sd, name + ".gate", x), _linear(sd, name + ".up", x))
    else:
        h = REF_ACT[cfg.ffn](_linear(sd, name + ".up", x))
    return _linear(sd, name + ".down", h)


def _expert(cfg, sd, name, e, x):
    b = lambda part: sd[f"{name}.{part}_bias"][e] if f"{name}.{part}_bias" in sd else 0  # noqa: E731
    h = sd[name + ".up"][e] @ x + b("up")
    if cfg.ffn in REF_GATE or cfg.ffn in REF_CLAMPED:
        h = _gated(cfg, sd[name + ".gate"][e] @ x + b("gate"), h)
    else:
        h = REF_ACT[cfg.ffn](h)
    return sd[name + ".down"][e] @ h + b("down")


def _route(cfg, sd, name, x):
    """One token x [d] -> (experts, weights) as the router help text describes each choice."""
    logits = sd[name + ".weight"] @ x + (sd[name + ".bias"] if name + ".bias" in sd else 0)
    k = cfg.experts_per_token
    if cfg.router == "topk_softmax":                     # softmax over the k largest logits
        idx = sorted(range(len(logits)), key=lambda e: -logits[e])[:k]
        return idx, torch.softmax(logits[idx], -1)
    scores = torch.softmax(logits, -1) if cfg.router == "softmax_topk" else torch.sigmoid(logits)
    choice = scores + sd[name + ".selection_bias"] if cfg.router_selection_bias else scores.clone()
    if cfg.router_groups > 1:                            # only experts inside the best groups may be chosen
        size = len(choice) // cfg.router_groups
        score = REF_GROUP_SCORES[cfg.router_group_score]
        group_score = [score(choice[g * size:(g + 1) * size].tolist()) for g in range(cfg.router_groups)]
        best = sorted(range(cfg.router_groups), key=lambda g: -group_score[g])[:cfg.router_group_topk]
        for g in set(range(cfg.router_groups)) - set(best):   # never chosen, whatever the bias makes the rest
            choice[g * size:(g + 1) * size] = float("-inf")
    idx = sorted(range(len(choice)), key=lambda e: -choice[e])[:k]
    w = scores[idx]
    if cfg.router_renorm:
        w = w / w.sum()
    return idx, w * cfg.routed_scale


def _moe(cfg, sd, name, x):
    out = torch.zeros_like(x)
    for b in range(x.shape[0]):
        for t in range(x.shape[1]):
            xt = x[b, t]
            idx, w = _route(cfg, sd, name + ".router", xt)
            if cfg.router_scales_input:                      # the weight scales what the expert reads
                y = sum(_expert(cfg, sd, name + ".experts", e, w[j] * xt) for j, e in enumerate(idx))
            else:
                y = sum(w[j] * _expert(cfg, sd, name + ".experts", e, xt) for j, e in enumerate(idx))
            if cfg.n_shared_experts:
                s = _ffn(cfg, sd, name + ".shared", xt)
                if cfg.shared_expert_gate:
                    s = torch.sigmoid(sd[name + ".shared_gate.weight"] @ xt) * s
                y = y + s
            out[b, t] = y
    return out
