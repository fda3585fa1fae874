"""An independent reference for every variant choice: a hand-written forward from the formulas.

`reference_logits` re-derives the whole model from the config's help texts and the lecture formulas with plain
torch ops on the built model's own weights (read by name from its state dict); it imports nothing from the
engine's layers. Held against the model on the whole variant grid (every pair of choices, both attention
paths), so a post-norm block whose FFN half went pre-norm, or a sinusoidal table with sin and cos swapped,
fails here even where no transformers family has the variant. The reference's tables name each choice it
implements; a test holds them equal to FIELDS[...].choices, so a new choice without a reference fails.
Plus properties only the right code has: post-norm block outputs are normalized, sinusoidal entries are
sin(p / 10000^(2i/d)) and cos(p / 10000^(2i/d)).
"""
import math

import pytest
import torch

from engine.config import FIELDS
from engine.layers.position import sinusoidal_table
from engine.model import build_model
from tests import ssm_reference
from tests.helpers import AXES, grid_cases, make, variant_configs
from tests.hybrid_cases import hybrid_configs
from tests.reference_ffn import REF_ACT, REF_CLAMPED, REF_GATE, REF_GROUP_SCORES, REF_ROUTERS, _ffn, _linear, _moe
from tests.reference_mixers import gdn_reference, kda_reference, lightning_reference

REF_NORMS = ("layernorm", "rmsnorm")
REF_POSITIONS = ("learned", "sinusoidal", "rope", "none")
REF_PLACEMENTS = ("pre", "post", "sandwich", "post_branch")
REF_BLOCKS = ("serial", "parallel")
REF_QK_SCOPES = {"head": "head", "all_heads": "projection", "rope_heads": "rotating heads, no gain"}
REF_MIXERS = ("full", "sliding", "chunked", "gdn", "mamba2", "mamba1", "kda", "lightning")   # attention or recurrent
REF_LAYER_TYPES = REF_MIXERS + ("none",) + tuple(f"{a}+{r}" for a in REF_MIXERS[:3] for r in REF_MIXERS[3:])
REF_FFN_TYPES = ("dense", "moe", "none")
REF_GATES = ("elementwise", "head")
# choices that do not change a forward pass: the dtype a decode cache keeps a recurrent state in, and how the
# published checkpoint stores its weights on disk (engine/checkpoint.py; the model is built in full precision)
NO_FORWARD_EFFECT = {"state_dtype": {"fp32", "bf16", "fp16"},
                     "ckpt_format": {"none", "mxfp4", "fp8_block", "nvfp4", "bnb_nf4", "bnb_fp4", "bnb_int8", "awq",
                                     "gptq"},
                     "ckpt_keep": {"attention", "dense_ffn", "shared_experts", "experts", "router", "embeddings",
                                   "head"}}
# choices held against transformers instead of a hand-written forward (their formulas are long; each family's
# own code is the independent reference): RoPE scaling in tests/test_rope_scaling.py, ALiBi in
# tests/test_interop_families.py; MLA attention (kv_lora_rank, a size, not a choice: this grid never sets it, so
# mla_rope_interleave and the sparse-attention switches are inert here) in tests/test_mla.py and
# tests/test_indexer.py
HELD_BY_TRANSFORMERS = {"rope_scaling": {"linear", "dynamic", "llama3", "yarn", "longrope"}, "position": {"alibi"},
                        "indexer_types": {"full", "shared"}}   # glm_moe_dsa, tests/test_indexer.py
HANDLED = {"ffn": set(REF_ACT) | set(REF_GATE) | set(REF_CLAMPED), "norm": set(REF_NORMS), "position": set(REF_POSITIONS),
           "norm_placement": set(REF_PLACEMENTS), "block": set(REF_BLOCKS), "qk_norm_scope": set(REF_QK_SCOPES),
           "router": set(REF_ROUTERS), "layer_types": set(REF_LAYER_TYPES), "rope_scaling": {"none"},
           "router_group_score": set(REF_GROUP_SCORES), "ffn_types": set(REF_FFN_TYPES), "attn_gate": set(REF_GATES),
           "attn_temperature_layers": {"all", "nope"}, "ssm_gate": set(ssm_reference.SSM_GATES)}
CONFIGS = [c for c in variant_configs() if not c.mla]   # MLA and sparse attention: against transformers (see above)
HYBRIDS = hybrid_configs()
MOE = dict(n_experts=4, experts_per_token=2, expert_d_ff=8)
MOE_CONFIGS = [make(MOE | c) for c in (
    {}, {"router_renorm": False}, {"router": "topk_softmax"}, {"router": "sigmoid", "routed_scale": 2.5},
    {"router": "sigmoid", "router_selection_bias": True, "router_groups": 2, "router_group_topk": 1},
    {"router_groups": 2, "router_group_topk": 1, "router_group_score": "max", "router_renorm": False},
    {"n_shared_experts": 2, "shared_d_ff": 4, "shared_expert_gate": True, "expert_bias": True, "ffn": "swiglu"},
    {"moe_first_dense": 1, "ffn": "relu", "n_shared_experts": 1, "qk_norm": True, "qk_norm_scope": "all_heads"},
    {"moe_every": 2, "experts_per_token": 1, "ffn": "geglu", "block": "parallel", "norm_placement": "sandwich"},
    {"router": "topk_softmax", "expert_bias": True, "ffn": "swiglu_clamped", "swiglu_limit": 0.5,   # gpt-oss
     "swiglu_alpha": 1.5, "attn_sinks": True, "n_kv_heads": 2, "attn_window": 3, "moe_first_dense": 1},
    {"router": "sigmoid", "router_renorm": False, "router_scales_input": True, "n_shared_experts": 1,   # Llama 4
     "experts_per_token": 1, "router_selection_bias": True, "selection_bias_parameter": True})]
SEQ = 8          # longer than the grid's window (3) and global_every (2): both matter


def _norm(cfg, sd, name, x, gain=True):
    if cfg.norm == "layernorm":
        mu = x.mean(-1, keepdim=True)
        y = (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + cfg.norm_eps)
    else:
        y = x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + cfg.norm_eps)
    if cfg.norm_affine and gain:
        y = y * sd[name + ".weight"]
        if cfg.norm == "layernorm" and cfg.norm_bias:
            y = y + sd[name + ".bias"]
    return y


def _sinusoids(T, d):
    pe = torch.zeros(T, d, dtype=torch.float64)
    for p in range(T):
        for i in range(0, d, 2):
            pe[p, i] = math.sin(p / 10000 ** (i / d))
            if i + 1 < d:
                pe[p, i + 1] = math.cos(p / 10000 ** (i / d))
    return pe


def _rope(cfg, x, base):
    """Rotate-half RoPE on the first r dims of x [B, H, T, hd]: pair (i, i + r/2) turns by p * base^(-2i/r)."""
    r, T = cfg.rotary_dim, x.shape[2]
    out = x.clone()
    for i in range(r // 2):
        theta = torch.arange(T, dtype=torch.float64) * base ** (-2 * i / r)
        a, b = x[..., i], x[..., i + r // 2]
        out[..., i] = a * torch.cos(theta) - b * torch.sin(theta)
        out[..., i + r // 2] = b * torch.cos(theta) + a * torch.sin(theta)
    return out


def _attention(cfg, sd, name, x, layer):
    B, T, _ = x.shape
    H, Hkv, hd = cfg.n_heads, cfg.kv_heads, cfg.head_width
    q, k = _linear(sd, name + ".q_proj", x), _linear(sd, name + ".k_proj", x)
    if cfg.qk_norm and REF_QK_SCOPES[cfg.qk_norm_scope] == "projection":    # one norm over all heads at once
        q, k = _norm(cfg, sd, name + ".q_norm", q), _norm(cfg, sd, name + ".k_norm", k)
    q = q.view(B, T, H, hd).transpose(1, 2)
    k = k.view(B, T, Hkv, hd).transpose(1, 2)
    v = _linear(sd, name + ".v_proj", x).view(B, T, Hkv, hd).transpose(1, 2)
    rotates = cfg.position == "rope" and layer + 1 not in (cfg.nope_layers or ())   # NoPE layers skip RoPE
    if cfg.qk_norm and REF_QK_SCOPES[cfg.qk_norm_scope] == "head":          # one gain shared by the heads
        q, k = _norm(cfg, sd, name + ".q_norm", q), _norm(cfg, sd, name + ".k_norm", k)
    if cfg.qk_norm and cfg.qk_norm_scope == "rope_heads" and rotates:        # per head, no gain (Llama 4)
        q, k = _norm(cfg, sd, "", q, gain=False), _norm(cfg, sd, "", k, gain=False)
    words = cfg.layer_types[layer].split("+") if cfg.layer_types is not None else None   # kinds win over global_every
    if words is not None:
        local = cfg.attn_window is not None and "sliding" in words
    else:
        local = cfg.attn_window is not None and not (cfg.global_every and (layer + 1) % cfg.global_every == 0)
    chunk = cfg.attn_chunk if words is not None and "chunked" in words else None
    if rotates:
        base = cfg.rope_local_base if local and cfg.rope_local_base is not None else cfg.rope_base
        q, k = _rope(cfg, q, base), _rope(cfg, k, base)
    if cfg.attn_temperature is not None and (cfg.attn_temperature_layers == "all" or not rotates):
        p = torch.arange(T, dtype=torch.float64) + (1 if cfg.attn_temperature_one_based else 0)
        q = q * (1 + cfg.attn_temperature * torch.log(1 + torch.floor(p / cfg.attn_temperature_floor)))[:, None]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = (j <= i) & ((i - j < cfg.attn_window) if local else True)
    if chunk is not None:                                     # only the query's own block of `chunk` positions
        allowed = allowed & (i // chunk == j // chunk)
    heads = []
    for h in range(H):
        kv = h // (H // Hkv)                                  # query head h reads key/value head h // group
        s = q[:, h] @ k[:, kv].transpose(-1, -2) * (1 / math.sqrt(hd) if cfg.attn_scale is None else cfg.attn_scale)
        if cfg.attn_softcap is not None:
            s = cfg.attn_softcap * torch.tanh(s / cfg.attn_softcap)
        s = s.masked_fill(~allowed, float("-inf"))
        if cfg.attn_sinks:                                    # exp(sink) joins the denominator, with no value
            sink = sd[name + ".sinks"][h]
            m = torch.maximum(s.amax(-1, keepdim=True), sink)    # shifted by the largest logit: no overflow
            p = torch.exp(s - m) / (torch.exp(sink - m) + torch.exp(s - m).sum(-1, keepdim=True))
        else:
            p = torch.softmax(s, -1)
        out = p @ v[:, kv]
        if cfg.attn_gate == "head":                           # one sigmoid gate per head, from the block input
            out = out * torch.sigmoid(_linear(sd, name + ".g_proj", x)[..., h:h + 1])
        heads.append(out)
    out = torch.cat(heads, -1)
    if cfg.attn_gate == "elementwise":                        # one sigmoid gate per output dimension
        out = out * torch.sigmoid(_linear(sd, name + ".g_proj", x))
    return _linear(sd, name + ".o_proj", out) * cfg.attn_out_scale


def _block(cfg, sd, b, x, layer):
    word = "full" if cfg.layer_types is None else cfg.layer_types[layer]
    parts = [] if word == "none" else word.split("+")         # the layer's mixers, their outputs added
    mixers = {"full": lambda h: _attention(cfg, sd, b + ".attn", h, layer),
              "sliding": lambda h: _attention(cfg, sd, b + ".attn", h, layer),
              "chunked": lambda h: _attention(cfg, sd, b + ".attn", h, layer),
              "gdn": lambda h: gdn_reference(cfg, sd, b + ".gdn", h),
              "mamba2": lambda h: ssm_reference.mamba2(cfg, sd, b + ".mamba", h),
              "mamba1": lambda h: ssm_reference.mamba1(cfg, sd, b + ".mamba", h),
              "kda": lambda h: kda_reference(cfg, sd, b + ".kda", h),
              "lightning": lambda h: lightning_reference(cfg, sd, b + ".lightning", h)}
    A = lambda h: sum(mixers[part](h) for part in parts)  # noqa: E731
    if cfg.ffn_types is not None:
        kind = cfg.ffn_types[layer]
    else:
        moe = cfg.n_experts is not None and layer >= (cfg.moe_first_dense or 0) and (layer + 1) % cfg.moe_every == 0
        kind = "moe" if moe else "dense"
    F = lambda h: (_moe if kind == "moe" else _ffn)(cfg, sd, b + ".ffn", h) * cfg.ffn_out_scale  # noqa: E731
    if not parts or kind == "none":                           # a serial layer with one branch: only that step
        return _one_branch(cfg, sd, b, x, A if parts else F, "attn" if parts else "ffn")
    N = lambda n, h: _norm(cfg, sd, f"{b}.{n}", h)  # noqa: E731
    parallel, a = cfg.block == "parallel", cfg.residual_alpha    # every residual add is alpha x + branch
    if cfg.norm_placement == "post":                          # N(alpha x + F(x))
        if parallel:
            return N("norm1", a * x + A(x) + F(x))
        x = N("norm1", a * x + A(x))
        return N("norm2", a * x + F(x))
    branch = cfg.norm_placement in ("sandwich", "post_branch")    # a norm on each branch output
    wrap_a = (lambda y: N("post_attn_norm", y)) if branch else (lambda y: y)
    wrap_f = (lambda y: N("post_ffn_norm", y)) if branch else (lambda y: y)
    N1 = (lambda h: h) if cfg.norm_placement == "post_branch" else (lambda h: N("norm1", h))   # OLMo-2: x + N(F(x))
    N2 = (lambda h: h) if cfg.norm_placement == "post_branch" else (lambda h: N("norm2", h))
    if parallel:                                              # x + A(N1(x)) + F(N2(x)), N2 = N1 when shared
        h1 = N1(x)
        h2 = h1 if cfg.parallel_shared_norm else N2(x)
        return a * x + wrap_a(A(h1)) + wrap_f(F(h2))
    x = a * x + wrap_a(A(N1(x)))
    return a * x + wrap_f(F(N2(x)))


def _one_branch(cfg, sd, b, x, branch, which):
    """x + Y(N(x)) pre, N(x + Y(x)) post, x + P(Y(N(x))) sandwich, x + P(Y(x)) post_branch, with the branch's
    own norms (norm1 and post_attn_norm for a mixer, norm2 and post_ffn_norm for an FFN)."""
    n_in, n_out = ("norm1", "post_attn_norm") if which == "attn" else ("norm2", "post_ffn_norm")
    N = lambda n, h: _norm(cfg, sd, f"{b}.{n}", h)  # noqa: E731
    if cfg.norm_placement == "post":
        return N(n_in, cfg.residual_alpha * x + branch(x))
    h = x if cfg.norm_placement == "post_branch" else N(n_in, x)
    y = branch(h)
    return cfg.residual_alpha * x + (N(n_out, y) if cfg.norm_placement in ("sandwich", "post_branch") else y)


def reference_logits(cfg, sd, idx):
    """The whole forward in float64 from the formulas; `sd` is the model's state dict (tied head included)."""
    T = idx.shape[1]
    x = sd["tok_emb.weight"][idx]
    if cfg.embed_scale:
        x = x * math.sqrt(cfg.d_model)
    x = x * cfg.embed_multiplier
    if cfg.position == "learned":
        x = x + sd["pos_emb.weight"][:T]
    elif cfg.position == "sinusoidal":
        x = x + _sinusoids(T, cfg.d_model)
    if cfg.embed_norm:
        x = _norm(cfg, sd, "emb_norm", x)
    for layer in range(cfg.n_layers):
        x = _block(cfg, sd, f"blocks.{layer}", x, layer)
    if cfg.final_norm:
        x = _norm(cfg, sd, "final_norm", x)
    z = x @ sd["head.weight"].T
    if cfg.head_bias:                                         # one learned bias per vocabulary entry
        z = z + sd["head.bias"]
    z = z * cfg.logit_scale                                   # the scale comes before the soft cap (Cohere)
    return cfg.logit_softcap * torch.tanh(z / cfg.logit_softcap) if cfg.logit_softcap is not None else z


def _random_model(cfg, seed=0):
    """float64 model with every weight redrawn so each matters: gains away from 1, biases away from 0."""
    model = build_model(cfg, dtype=torch.float64, seed=seed).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in list(model.parameters()) + list(model.buffers()):   # buffers: the MoE selection bias
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.4)
    return model


def test_reference_implements_every_declared_choice():
    for name, spec in FIELDS.items():
        if spec.choices:
            covered = HANDLED.get(name, set()) | HELD_BY_TRANSFORMERS.get(name, set()) | NO_FORWARD_EFFECT.get(
                name, set())
            assert set(spec.choices) == covered, f"{name}: a choice without a reference forward"


def test_grid_reaches_every_choice_and_switch():
    for name, values in AXES.items():
        configs = MOE_CONFIGS if FIELDS[name].group == "moe" else CONFIGS   # MoE knobs act only with experts
        for value in values:
            assert any(getattr(c, name) == value for c in configs), (name, value)


@pytest.mark.parametrize("impl", ["sdpa", "explicit"])
@pytest.mark.parametrize("i", range(len(MOE_CONFIGS)))
def test_moe_model_equals_reference_forward(i, impl):
    cfg = MOE_CONFIGS[i]
    model = _random_model(cfg, seed=100 + i)
    model.set_attention(impl)
    idx = torch.randint(0, cfg.vocab_size, (2, SEQ), generator=torch.Generator().manual_seed(i))
    with torch.no_grad():
        got, want = model(idx), reference_logits(cfg, model.state_dict(), idx)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=lambda m: f"{cfg}\n{m}")   # as above


@pytest.mark.parametrize("i, impl", grid_cases(CONFIGS))
def test_model_equals_reference_forward(i, impl):
    cfg = CONFIGS[i]
    if cfg.rope_scaling != "none" or cfg.position == "alibi":   # held against transformers: the config's
        cfg = cfg.replace(rope_scaling="none", rope_factor=1.0,  # other choices still meet the reference
                          position="none" if cfg.position == "alibi" else cfg.position)
    model = _random_model(cfg, seed=i)
    model.set_attention(impl)
    idx = torch.randint(0, cfg.vocab_size, (2, SEQ), generator=torch.Generator().manual_seed(i))
    with torch.no_grad():
        got, want = model(idx), reference_logits(cfg, model.state_dict(), idx)
    # float64 weights on both sides, but the model builds its sinusoidal and RoPE tables in fp32 by design
    # (angles ~1e-7 off, up to ~3e-6 in the logits of the grid); a wrong formula moves them by ~1e-1
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=lambda m: f"{cfg}\n{m}")


@pytest.mark.parametrize("name", [n for n, c in HYBRIDS.items() if not c.mla])   # MLA: held in test_mla.py
def test_hybrid_model_equals_reference_forward(name):
    cfg = HYBRIDS[name].replace(dropout=0.0)
    model = _random_model(cfg, seed=7)
    idx = torch.randint(0, cfg.vocab_size, (2, SEQ), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        got, want = model(idx), reference_logits(cfg, model.state_dict(), idx)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}\n{m}")


@pytest.mark.parametrize("d", [6, 7, 16])
def test_sinusoidal_entries_are_sin_and_cos_of_p_over_10000_pow(d):
    table = sinusoidal_table(torch.arange(12), d)
    for p in range(12):
        for i in range(0, d, 2):
            angle = p / 10000 ** (i / d)
            assert table[p, i].item() == pytest.approx(math.sin(angle), abs=1e-6)      # fp32 table
            if i + 1 < d:
                assert table[p, i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


@pytest.mark.parametrize("norm", REF_NORMS)
@pytest.mark.parametrize("block", REF_BLOCKS)
def test_post_norm_block_outputs_are_normalized(norm, block):
    cfg = make({"norm_placement": "post", "norm": norm, "norm_affine": False, "block": block})
    model = _random_model(cfg)
    outs = []
    for b in model.blocks:
        b.register_forward_hook(lambda mod, args, out: outs.append(out))
    with torch.no_grad():
        model(torch.randint(0, cfg.vocab_size, (2, SEQ), generator=torch.Generator().manual_seed(1)))
    assert len(outs) == cfg.n_layers
    for y in outs:
        ms = (y ** 2).mean(-1)
        if norm == "layernorm":
            torch.testing.assert_close(y.mean(-1), torch.zeros_like(ms), rtol=0, atol=1e-12)
        # mean square 1 up to the eps inside the square root: var / (var + eps) with var of order 1
        torch.testing.assert_close(ms, torch.ones_like(ms), rtol=0, atol=1e-4)


@pytest.mark.parametrize("norm", REF_NORMS)
def test_parameter_free_norm_has_no_parameters_and_normalizes(norm):
    cfg = make({"norm": norm, "norm_affine": False, "embed_norm": True})
    model = _random_model(cfg)
    assert model.emb_norm is not None and list(model.emb_norm.parameters()) == []
    x = torch.randn(3, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 5 + 2
    y = model.emb_norm(x)
    scale = torch.sqrt(((x - x.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True) + cfg.norm_eps) \
        if norm == "layernorm" else torch.sqrt((x ** 2).mean(-1, keepdim=True) + cfg.norm_eps)
    centred = x - x.mean(-1, keepdim=True) if norm == "layernorm" else x
    torch.testing.assert_close(y, centred / scale, rtol=1e-12, atol=1e-12)
