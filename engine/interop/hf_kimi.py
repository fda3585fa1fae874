"""Kimi Linear (kimi_linear): config.json reader and writer and weight pairs, as transformers 5 computes it.

Kimi Delta Attention layers (`kda`, engine/layers/kda.py) beside MLA layers without any rotary embedding (the
published configs say mla_use_nope; transformers never rotates): `position: none`, the MLA's rotary key part
kept unrotated. Which layer is which: layer_types (linear_attention / full_attention), else
linear_attn_config.kda_layers / full_attn_layers (1-based, as the checkpoints give them), else full attention in
every 4th layer from the 5th. KDA has one head count and width for q, k and v (linear_attn_config.num_heads,
head_dim) and a short conv of short_conv_kernel_size taps. The FFN is DeepSeek-V3's MoE (sigmoid scores, the
bias-corrected choice inside groups, renormalised, times routed_scaling_factor, shared experts of the routed
width) after the first first_k_dense_replace dense layers (or per layer: mlp_layer_types). transformers keeps
the MLA latent norm's epsilon at 1e-6 whatever rms_norm_eps says (mla_norm_eps).
"""
from __future__ import annotations

from typing import Any

from engine.config import ModelConfig
from engine.interop.hf_deepseek import deepseek_ffn_pairs, mla_pairs
from engine.interop.hf_defaults import DEFAULTS, GATED_ACTS
from engine.interop.hf_reader import _Reader
from engine.interop.hf_writer import _GATED, _Writer
from engine.interop.pair import Pair, norm_pairs
from engine.layers.gdn import gdn_dims

DEFAULTS["kimi_linear"] = dict(   # transformers 5.24's KimiLinearConfig
    vocab_size=163840, hidden_size=2304, intermediate_size=9216, moe_intermediate_size=1024, num_hidden_layers=27,
    num_attention_heads=32, num_key_value_heads=32, num_shared_experts=1, routed_scaling_factor=2.446,
    kv_lora_rank=512, q_lora_rank=None, qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=128,
    num_expert_group=1, topk_group=1, num_experts_per_token=8, moe_renormalize=True, hidden_act="silu",
    model_max_length=1048576, rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False,
    attention_dropout=0.0, num_experts=256, linear_head_dim=128, linear_num_heads=32, linear_conv_kernel_dim=4,
    first_k_dense_replace=1)
_PAD = 163839   # KimiLinearConfig's pad_token_id
_ALIASES = {"norm_topk_prob": "moe_renormalize", "n_group": "num_expert_group", "num_local_experts": "num_experts",
            "num_experts_per_tok": "num_experts_per_token", "n_shared_experts": "num_shared_experts",
            "max_position_embeddings": "model_max_length"}   # KimiLinearConfig.attribute_map
_LINEAR = {"num_heads": "linear_num_heads", "head_dim": "linear_head_dim",
           "short_conv_kernel_size": "linear_conv_kernel_dim"}


def _aliased(r: _Reader) -> None:
    """attribute_map: a config may use either name; the mapped one is what the class stores."""
    for alias, key in _ALIASES.items():
        if alias in r.d:
            r.read.add(alias)
            if r.d.get(key) is None:
                r.d = {**r.d, key: r.d[alias]}


def _listed_kinds(r: _Reader, n: int, linear: dict) -> list[str]:
    """layer_types from linear_attn_config's kda_layers and full_attn_layers; a layer in neither is a problem
    named by those keys (the file has no layer_types)."""
    types: list[str | None] = [None] * n
    for key, kind in (("full_attn_layers", "full_attention"), ("kda_layers", "linear_attention")):
        for layer in linear[key]:
            if isinstance(layer, int) and 1 <= layer <= n:
                types[layer - 1] = kind
            else:
                r.bad(f"linear_attn_config.{key}", layer, f"1-based layer numbers from 1 to {n}")
    if None in types:
        missing = [i + 1 for i, t in enumerate(types) if t is None]
        r.bad("linear_attn_config.kda_layers", linear["kda_layers"], f"layers {missing} (of num_hidden_layers={n}) "
                                                                     f"are in neither it nor full_attn_layers")
    return [t or "full_attention" for t in types]


def _layer_kinds(r: _Reader, n: int, linear: dict) -> tuple[str, ...]:
    types = r.nullable("layer_types")
    if types is None and "kda_layers" in linear and "full_attn_layers" in linear:
        types = _listed_kinds(r, n, linear)
    if types is None:
        types = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n)]
    if len(types) != n or set(types) - {"linear_attention", "full_attention"}:
        r.bad("layer_types", types, f"{n} entries of linear_attention / full_attention (every layer listed once)")
        return ("full",) * n
    return tuple("kda" if t == "linear_attention" else "full" for t in types)


def _ffns(r: _Reader, n: int) -> dict[str, Any]:
    """mlp_layer_types, else first_k_dense_replace dense layers then MoE; the MoE sizes when some layer is MoE."""
    kinds = r.nullable("mlp_layer_types")
    r.read.add("first_k_dense_replace")
    if kinds is None:
        first = r.d.get("first_k_dense_replace")
        first = 1 if first is None else first
        kinds = ["dense" if i < first else "sparse" for i in range(n)]
    if len(kinds) != n or set(kinds) - {"dense", "sparse"}:
        r.bad("mlp_layer_types", kinds, f"{n} entries of dense / sparse")
        kinds = ["dense"] * n
    routing = {"num_experts", "num_experts_per_token", "moe_intermediate_size", "num_shared_experts",
               "moe_renormalize", "num_expert_group", "topk_group", "routed_scaling_factor"}
    if "sparse" not in kinds:
        r.read.update(routing)
        return {}
    dense = kinds.index("sparse")
    layout = (dict(moe_first_dense=dense or None) if kinds == ["dense"] * dense + ["sparse"] * (n - dense) else
              dict(ffn_types=tuple("moe" if k == "sparse" else "dense" for k in kinds)))
    return dict(layout, n_experts=r("num_experts"), experts_per_token=r("num_experts_per_token"),
                expert_d_ff=r("moe_intermediate_size"), n_shared_experts=r("num_shared_experts") or None,
                router="sigmoid", router_selection_bias=True, router_renorm=bool(r("moe_renormalize")),
                routed_scale=float(r("routed_scaling_factor")), router_groups=r("num_expert_group"),
                router_group_topk=r("topk_group"))


def _kimi_linear(r: _Reader) -> dict[str, Any]:
    _aliased(r)
    linear = r.d.get("linear_attn_config") or {}
    r.read.add("linear_attn_config")
    if not isinstance(linear, dict):
        r.bad("linear_attn_config", linear, "a mapping")
        linear = {}
    for key in set(linear) - set(_LINEAR) - {"kda_layers", "full_attn_layers"}:
        r.bad(f"linear_attn_config.{key}", linear[key], "not read by transformers' Kimi Linear; refusing to guess")
    kda = {ours: linear[key] if linear.get(key) is not None else r(ours) for key, ours in _LINEAR.items()}
    r.read.update(_LINEAR.values())   # the flat copies transformers' to_dict() writes beside the mapping
    d, heads, n = r("hidden_size"), r("num_attention_heads"), r("num_hidden_layers")
    if r("num_key_value_heads", heads) != heads:
        r.bad("num_key_value_heads", r.d.get("num_key_value_heads"), "MLA rebuilds keys and values for every head")
    r.expect("attention_bias", (False,), "our `bias` would put biases on the MLP too")
    r.expect("attention_dropout", (0.0,), "our dropout also acts on the residual stream")
    r.expect("mla_use_nope", (None, True), "transformers' Kimi Linear never rotates the MLA keys")
    r.expect("moe_router_activation_func", (None, "sigmoid"), "transformers scores Kimi's experts with a sigmoid")
    r.expect("use_grouped_topk", (None, True), "transformers always chooses inside the best groups")
    ffn = r.act("hidden_act", GATED_ACTS)
    if ffn != "swiglu":
        r.bad("hidden_act", r("hidden_act"), "the KDA convolution applies hidden_act; ours is SiLU")
    for key in ("head_dim", "qk_head_dim"):   # derived by transformers (qk_rope_head_dim, nope + rope)
        r.read.add(key)
    for key, why in (("rope_theta", "no rotary embedding (NoPE)"), ("rope_scaling", "no rotary embedding (NoPE)"),
                     ("rope_parameters", "no rotary embedding (NoPE)"),
                     ("moe_layer_freq", "transformers makes every layer after the dense ones MoE"),
                     ("num_nextn_predict_layers", "multi-token-prediction modules transformers does not build"),
                     ("output_router_logits", "whether transformers returns router logits: bookkeeping")):
        if key in r.d:
            r.ignore(key, why)
    if r.d.get("moe_layer_freq", 1) != 1:
        r.bad("moe_layer_freq", r.d["moe_layer_freq"], "transformers makes every layer after the dense ones MoE")
    eps = float(r("rms_norm_eps"))
    return dict(vocab_size=r("vocab_size"), context_length=r("model_max_length"), d_model=d, n_layers=n,
                n_heads=heads, d_ff=r("intermediate_size"), ffn=ffn, norm="rmsnorm", norm_eps=eps, position="none",
                bias=False, tie_embeddings=bool(r("tie_word_embeddings")), kv_lora_rank=r("kv_lora_rank"),
                q_lora_rank=r.nullable("q_lora_rank"), qk_rope_head_dim=r("qk_rope_head_dim"),
                qk_nope_head_dim=r("qk_nope_head_dim"), v_head_dim=r("v_head_dim"),
                mla_norm_eps=None if eps == 1e-6 else 1e-6, layer_types=_layer_kinds(r, n, linear),
                gdn_k_heads=kda["linear_num_heads"], gdn_k_dim=kda["linear_head_dim"],
                gdn_conv_kernel=kda["linear_conv_kernel_dim"], **_ffns(r, n))


READERS = {"kimi_linear": _kimi_linear}


# ---- writing: ModelConfig -> config.json ---------------------------------------------------------------------
def _write_kimi_linear(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", moe=True, mla=True, hybrid=True)
    w.silu_conv("KDA")
    w.no_dropout()
    w.no_window()
    w.need("block", "serial")
    w.need("bias", False)
    w.need("qkv_bias", False)
    w.need("position", "none", "Kimi Linear has no rotary embedding")
    w.need("state_dtype", None, "the config has no key for the state's dtype")
    w.check(c.mla, "kv_lora_rank", "its attention layers are MLA")
    w.check(c.layer_types is not None and set(c.layer_types) <= {"kda", "full"}, "layer_types",
            "each layer is KDA (linear_attention) or MLA (full_attention)")
    w.need("mla_norm_eps" if c.mla_norm_eps is not None else "norm_eps", 1e-6,
           "transformers keeps the latent norm at 1e-6")
    d = gdn_dims(c)
    w.check((d.v_heads, d.v_dim) == (d.k_heads, d.k_dim), "gdn_v_heads", "KDA: one head count and width for q, k, v")
    kinds = ["linear_attention" if "kda" in s.mixers else "full_attention" for s in c.layer_specs]
    out = dict(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.ffn_width,
               num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.n_heads,
               rms_norm_eps=c.norm_eps, tie_word_embeddings=c.tie_embeddings, model_max_length=c.context_length,
               attention_bias=False, attention_dropout=0.0, hidden_act=w.act(_GATED), mla_use_nope=True,
               kv_lora_rank=c.kv_lora_rank, q_lora_rank=c.q_lora_rank, qk_rope_head_dim=c.qk_rope_head_dim,
               qk_nope_head_dim=c.qk_nope_head_dim, v_head_dim=c.v_head_dim,
               # transformers' default pad id (163839) is an embedding row: only where the vocabulary has it
               pad_token_id=_PAD if c.vocab_size > _PAD else None,
               linear_attn_config=dict(num_heads=d.k_heads, head_dim=d.k_dim, short_conv_kernel_size=d.conv_kernel,
                                       kda_layers=[i + 1 for i, k in enumerate(kinds) if k == "linear_attention"],
                                       full_attn_layers=[i + 1 for i, k in enumerate(kinds) if k == "full_attention"]))
    if c.n_experts is None:
        return dict(out, first_k_dense_replace=c.n_layers)
    w.need("router", "sigmoid", "Kimi Linear scores experts with a sigmoid")
    w.need("router_selection_bias", True, "Kimi Linear always has e_score_correction_bias")
    w.need("router_group_score", "top2_sum", "a group scores the sum of its two best experts")
    w.need("expert_bias", False)
    w.need("shared_expert_gate", False)
    w.check((c.n_shared_experts or 0) >= 1, "n_shared_experts", "Kimi Linear always builds shared experts")
    w.check(c.shared_d_ff in (None, c.expert_width), "shared_d_ff", "shared experts have the routed width")
    return dict(out, mlp_layer_types=["sparse" if s.ffn == "moe" else "dense" for s in c.layer_specs],
                num_experts=c.n_experts, num_experts_per_token=c.experts_per_token,
                moe_intermediate_size=c.expert_width, num_shared_experts=c.n_shared_experts,
                moe_renormalize=c.router_renorm, routed_scaling_factor=c.routed_scale,
                num_expert_group=c.router_groups, topk_group=c.router_group_topk)


WRITERS = {"kimi_linear": _write_kimi_linear}


# ---- weights ---------------------------------------------------------------------------------------------------
_KDA = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "conv1d": "conv1d", "b_proj": "b_proj",
        "forget_gate.f_a_proj": "f_a_proj", "forget_gate.f_b_proj": "f_b_proj", "g_a_proj": "g_a_proj",
        "g_b_proj": "g_b_proj", "o_proj": "o_proj"}


def kimi_pairs(cfg: ModelConfig) -> list[Pair]:
    """Per layer: MLA (DeepSeek's names) or KDA under self_attn; a dense MLP or DeepSeek-V3's MoE under mlp."""
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.norm", ("final_norm",), "copy")]
    for i, spec in enumerate(cfg.layer_specs):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        a = h + "self_attn."
        pairs += norm_pairs(h, o)
        if spec.attention:
            pairs += mla_pairs(cfg, a, o + "attn.")
        else:
            pairs += [Pair(a + hf, (f"{o}kda.{ours}",), "copy") for hf, ours in _KDA.items()]
            pairs += [Pair(a + "forget_gate.dt_bias", (o + "kda.dt_bias",), "copy", raw=True),
                      Pair(a + "forget_gate.A_log", (o + "kda.A_log",), "kda_a_log", raw=True),
                      Pair(a + "o_norm.weight", (o + "kda.norm_weight",), "copy", raw=True)]
        pairs += deepseek_ffn_pairs(cfg, h, o, spec.ffn == "moe")
    return pairs


CODECS = {"kda_a_log": (lambda t, cfg: [t.reshape(-1)], lambda ts, cfg: ts[0].reshape(1, 1, -1, 1))}
