"""ModelConfig -> config.json of a 2025-26 family (smollm3, olmo3, seed_oss, exaone4, ministral3, glm4_moe, dots1,
ernie4_5_moe); the inverses of hf_recent.py's and hf_recent_moe.py's readers. Anything the family cannot express
is a problem naming our field. (ERNIE-4.5's dense model is Llama's up to the order of its rotary pairs, which
lives in the weights: it exports as llama.)"""
from __future__ import annotations

from typing import Any

from engine.interop.hf_writer import _GATED, _decoder, _Writer


def _types(w: _Writer) -> list[str]:
    """layer_types of full and sliding layers (no chunked ones here)."""
    return ["full_attention" if x is None else "sliding_attention" for x in w.cfg.layer_windows]


def _llama_sizes(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.check(c.bias or not c.qkv_bias, "qkv_bias", "biases on q, k, v only are Qwen2's and Seed-OSS's")
    return dict(_decoder(w), hidden_act=w.act(_GATED))


def _smollm3(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", nope=True)
    w.no_window()
    w.no_dropout()
    nope = set(c.nope_layers or ())
    return dict(_llama_sizes(w), attention_bias=c.bias, mlp_bias=c.bias, use_sliding_window=False,
                no_rope_layers=[int(i + 1 not in nope) for i in range(c.n_layers)],
                pad_token_id=None)   # the class's default id (128004) would not fit a smaller vocabulary


def _olmo3(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", "post_branch", qk_norm=True, qk_scope="all_heads", local_rope=True)
    w.no_dropout()
    w.need("bias", False, "OLMo-3 has no biases")
    w.need("qkv_bias", False)
    sliding = any(x is not None for x in c.layer_windows)
    w.check(c.rope_scaling == "none" or c.rope_local_base is not None or not sliding, "rope_scaling",
            "OLMo-3's sliding layers rotate unscaled: set rope_local_base")
    out = _llama_sizes(w)
    full = out.pop("rope_parameters")
    local = {"rope_type": "default", "rope_theta": c.rope_local_base or c.rope_base}
    return dict(out, attention_bias=False, sliding_window=c.attn_window if sliding else None, layer_types=_types(w),
                rope_parameters={"full_attention": full, "sliding_attention": local})


def _seed_oss(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", embed_dropout=False)
    w.no_window()
    w.check(not c.embed_dropout or c.dropout == 0, "embed_dropout",
            "Seed-OSS drops attention weights and branch outputs, not the embeddings")
    return dict(_decoder(w), hidden_act=w.act(_GATED), attention_bias=c.bias or c.qkv_bias,
                attention_out_bias=c.bias, mlp_bias=c.bias, attention_dropout=c.dropout, residual_dropout=c.dropout)


def _exaone4(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", "post_branch", qk_norm=True, nope=True)
    w.no_dropout()
    w.need("bias", False, "EXAONE 4 has no biases")
    w.need("qkv_bias", False)
    types = _types(w)
    sliding = "sliding_attention" in types
    full = tuple(i + 1 for i, t in enumerate(types) if t == "full_attention") if sliding else ()
    w.check(tuple(c.nope_layers or ()) == full, "nope_layers",
            "with windows exactly the full layers skip RoPE, without them none")
    return dict(_llama_sizes(w), sliding_window=c.attn_window if sliding else None, sliding_window_pattern=4,
                layer_types=types)


def _ministral3(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", temperature=True)
    w.no_dropout()
    w.need("bias", False)
    w.need("qkv_bias", False)
    w.need("rope_scaling", "yarn", "Ministral 3 extends its context with YaRN")
    w.check(c.global_every is None or c.global_every > c.n_layers, "global_every", "the window applies to every layer")
    w.check(c.layer_types is None or set(c.layer_types) == {"sliding"}, "layer_types", "the window applies to every layer")
    out = _llama_sizes(w)
    original = out["rope_parameters"].get("original_max_position_embeddings")
    if c.attn_temperature is not None:
        w.need("attn_temperature_one_based", False, "Ministral 3 counts positions from 0")
        w.need("attn_temperature_layers", "all", "Ministral 3 scales every layer's queries")
        # without YaRN there is no original context to step by: rope_scaling is the problem named
        w.check(original is None or c.attn_temperature_floor == original, "attn_temperature_floor",
                f"Ministral 3 steps the temperature every original context ({original})")
    out["rope_parameters"]["llama_4_scaling_beta"] = c.attn_temperature or 0.0
    return dict(out, sliding_window=c.attn_window)


def _deepseek_moe(w: _Writer) -> dict[str, Any]:
    """DeepSeek-V3's MoE as Glm4Moe and Dots1 configure it."""
    c = w.cfg
    for field, value in (("router", "sigmoid"), ("router_selection_bias", True), ("moe_every", 1),
                         ("expert_bias", False), ("shared_expert_gate", False), ("router_group_score", "top2_sum")):
        w.need(field, value, "DeepSeek-V3's MoE")
    w.check(c.shared_d_ff in (None, c.expert_width), "shared_d_ff", "shared experts have the routed width")
    return dict(n_routed_experts=c.n_experts, num_experts_per_tok=c.experts_per_token,
                moe_intermediate_size=c.expert_width, n_shared_experts=c.n_shared_experts or 0,
                first_k_dense_replace=c.moe_first_dense or 0, routed_scaling_factor=c.routed_scale,
                norm_topk_prob=c.router_renorm, n_group=c.router_groups, topk_group=c.router_group_topk)


def _glm4_moe(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", qk_norm=c.qk_norm, moe=True, mtp=True)
    w.no_window()
    w.no_dropout()
    w.need("bias", False, "GLM-4.5's attention_bias covers q, k and v only")
    w.check(c.n_experts is not None, "n_experts", "GLM-4.5 is a mixture of experts")
    w.check((c.n_shared_experts or 0) >= 1, "n_shared_experts", "GLM-4.5 always builds shared experts")
    out = dict(_decoder(w, partial=True), hidden_act=w.act(_GATED), attention_bias=c.qkv_bias,
               use_qk_norm=c.qk_norm, num_nextn_predict_layers=c.mtp_depth or 0, **_deepseek_moe(w))
    return dict(out, partial_rotary_factor=out["rope_parameters"]["partial_rotary_factor"])


def _dots1(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", qk_norm=True, moe=True)
    w.no_dropout()
    w.need("bias", False)
    w.need("qkv_bias", False)
    w.check(c.n_experts is not None, "n_experts", "dots.llm1 is a mixture of experts")
    return dict(_decoder(w), hidden_act=w.act(_GATED), attention_bias=False, sliding_window=c.attn_window,
                layer_types=_types(w), **_deepseek_moe(w))


def _ernie4_5_moe(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", moe=True, selection_param=True)
    w.no_window()
    w.no_dropout()
    w.need("bias", False)
    w.need("qkv_bias", False)
    w.check(c.n_experts is not None, "n_experts", "ERNIE-4.5-MoE is a mixture of experts")
    for field, value in (("router", "softmax_topk"), ("router_renorm", True), ("router_selection_bias", True),
                         ("selection_bias_parameter", True), ("router_groups", 1), ("routed_scale", 1.0),
                         ("expert_bias", False), ("shared_expert_gate", False)):
        w.need(field, value, "ERNIE-4.5's MoE")
    w.check(c.shared_d_ff in (None, c.expert_width), "shared_d_ff", "shared experts have the routed width")
    return dict(_decoder(w), hidden_act=w.act(_GATED), use_bias=False, moe_num_experts=c.n_experts,
                moe_k=c.experts_per_token, moe_intermediate_size=c.expert_width,
                moe_num_shared_experts=c.n_shared_experts or 0, moe_layer_start_index=c.moe_first_dense or 0,
                moe_layer_end_index=-1, moe_layer_interval=c.moe_every, router_aux_loss_coef=c.aux_loss_coef)


WRITERS = {"smollm3": _smollm3, "olmo3": _olmo3, "seed_oss": _seed_oss, "exaone4": _exaone4,
           "ministral3": _ministral3, "glm4_moe": _glm4_moe, "dots1": _dots1, "ernie4_5_moe": _ernie4_5_moe}
