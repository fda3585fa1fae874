"""ModelConfig -> config.json of a state-space hybrid family (bamba, nemotron_h, granitemoehybrid, falcon_h1,
jamba); the inverse of hf_ssm.py's readers. What a family's layout, mixer or multipliers cannot express is a
problem naming the field."""
from __future__ import annotations

import math
from typing import Any

from engine.interop.hf_writer import _GATED, _Writer

_STATE_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _sizes(w: _Writer, rope: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sizes every family here shares, RoPE's keys when it has them (else max_position_embeddings)."""
    c = w.cfg
    w.need("block", "serial")
    return dict(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.ffn_width,
                num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.kv_heads,
                rms_norm_eps=c.norm_eps, tie_word_embeddings=c.tie_embeddings, attention_dropout=0.0,
                **(rope or {"max_position_embeddings": c.context_length}))


def _kinds(w: _Writer, allowed: dict[tuple[tuple[str, ...], str], str]) -> list[str]:
    """Each layer's (mixers, FFN) as the family's word for it; a layer the family has no word for is a problem."""
    words = []
    for i, spec in enumerate(w.cfg.layer_specs):
        word = allowed.get((spec.mixers, spec.ffn))
        if word is None:
            w.problems.append(f"layer_types: layer {i + 1} ({'+'.join(spec.mixers) or 'no mixer'}, {spec.ffn} FFN) "
                              f"has no {w.family} layer kind")
        words.append(word)
    return words


def _mamba2(w: _Writer, gates: tuple[str, ...], multipliers: bool = False) -> dict[str, Any]:
    """The mamba_* keys (Bamba / Granite / Falcon-H1) of the config's Mamba-2 mixer."""
    c = w.cfg
    w.need("ssm_gate", gates, f"{w.family}'s gated norm")
    if not multipliers:
        w.need("ssm_in_scale", 1.0)
        w.need("ssm_proj_scales", None)
    return dict(mamba_n_heads=c.ssm_head_count, mamba_d_head=c.ssm_head_dim, mamba_n_groups=c.ssm_groups,
                mamba_d_state=c.ssm_state, mamba_d_conv=c.ssm_conv_kernel, mamba_chunk_size=c.ssm_chunk,
                mamba_conv_bias=c.ssm_conv_bias, mamba_proj_bias=c.ssm_proj_bias,
                time_step_limit=[c.ssm_dt_min, math.inf if c.ssm_dt_max is None else c.ssm_dt_max])


def _expand(w: _Writer) -> int:
    c = w.cfg
    inner = c.ssm_head_count * c.ssm_head_dim
    w.check(inner % c.d_model == 0, "ssm_heads", f"the inner width {inner} must be mamba_expand * d_model")
    return max(1, inner // c.d_model)


def _bamba(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", hybrid=True)
    w.silu_conv("Mamba")
    w.no_window()
    w.no_dropout()
    w.need("qkv_bias", False)
    w.need("ssm_out_scale", 1.0)
    w.check(c.rope_fraction == 0.5, "rope_fraction", "Bamba rotates half of each head")
    words = _kinds(w, {(("mamba2",), "dense"): "mamba", (("attention",), "dense"): "attention"})
    w.check(c.attn_width == c.d_model, "head_dim", "heads * head_dim must equal d_model")
    rope = w.rope(partial=True)
    rope["rope_parameters"].pop("partial_rotary_factor")   # fixed at 0.5 by BambaConfig
    return dict(_sizes(w, rope), **_mamba2(w, ("norm_gated",)), mamba_expand=_expand(w), hidden_act=w.act(_GATED),
                attention_bias=c.bias, mlp_bias=c.bias,
                attn_layer_indices=[i for i, k in enumerate(words) if k == "attention"])


def _nemotron_h(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", hybrid=True, moe=True)
    w.need("position", "none", "Nemotron-H's attention has no positional encoding")
    w.no_window()
    w.no_dropout()
    w.need("qkv_bias", False)
    w.need("ffn", "relu2", "its MLP and experts apply relu2")
    w.need("ssm_gate", "norm_gated")
    for field, plain in (("ssm_in_scale", 1.0), ("ssm_proj_scales", None), ("ssm_out_scale", 1.0),
                         ("ssm_dt_max", None)):
        w.need(field, plain)
    words = _kinds(w, {(("mamba2",), "none"): "mamba", (("attention",), "none"): "attention",
                       ((), "dense"): "mlp", ((), "moe"): "moe"})
    out = dict(vocab_size=c.vocab_size, hidden_size=c.d_model, layers_block_type=words,
               num_attention_heads=c.n_heads, num_key_value_heads=c.kv_heads, head_dim=c.head_width,
               max_position_embeddings=c.context_length, attention_bias=c.bias, mlp_bias=c.bias,
               intermediate_size=c.ffn_width, mlp_hidden_act="relu2", layer_norm_epsilon=c.norm_eps,
               tie_word_embeddings=c.tie_embeddings, mamba_num_heads=c.ssm_head_count, mamba_head_dim=c.ssm_head_dim,
               n_groups=c.ssm_groups, ssm_state_size=c.ssm_state, conv_kernel=c.ssm_conv_kernel,
               chunk_size=c.ssm_chunk, use_conv_bias=c.ssm_conv_bias, use_bias=c.ssm_proj_bias,
               time_step_min=c.ssm_dt_min, mamba_ssm_cache_dtype=_STATE_DTYPES[c.state_dtype or "fp32"])
    if "moe" not in words:
        return out   # no E layers: the MoE keys are unused, left at the class's defaults
    w.need("router", "sigmoid", "DeepSeek-V3 routing")
    w.need("router_selection_bias", True, "its router has e_score_correction_bias")
    w.need("router_group_score", "top2_sum")
    w.need("n_shared_experts", 1, "one shared expert")
    w.need("expert_bias", False)
    return dict(out, n_routed_experts=c.n_experts, num_experts_per_tok=c.experts_per_token,
                moe_intermediate_size=c.expert_width, n_shared_experts=1,
                moe_shared_expert_intermediate_size=c.shared_width, norm_topk_prob=c.router_renorm,
                n_group=c.router_groups, topk_group=c.router_group_topk, routed_scaling_factor=c.routed_scale)


def _granite(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", hybrid=True, moe=True, scales=True, softcaps=True)
    w.silu_conv("Mamba")
    w.need("attn_softcap", None)
    w.need("logit_softcap", None)
    w.no_window()
    w.no_dropout()
    w.need("qkv_bias", False)
    w.need("bias", False, "GraniteMoeHybrid's attention_bias leaves the MLP without biases")
    w.need("ffn_gate_scale", 1.0)
    for field in ("attn_out_scale", "ssm_out_scale"):   # residual_multiplier is written from ffn_out_scale
        w.need(field, c.ffn_out_scale, f"one residual_multiplier (ffn_out_scale {c.ffn_out_scale}) scales "
                                       f"attention, Mamba and FFN outputs alike")
    moe = c.n_experts is not None
    ffn = "moe" if moe else "dense"
    words = _kinds(w, {(("mamba2",), ffn): "mamba", (("attention",), ffn): "attention"})
    if c.position == "rope":
        rope = w.rope()
    else:
        w.need("position", "none", "RoPE or no positional encoding")
        rope = {"max_position_embeddings": c.context_length}
    out = dict(_sizes(w, rope), attention_bias=False, hidden_act=w.act(_GATED), layer_types=words, position_embedding_type="rope" if c.position == "rope" else "nope",
               attention_multiplier=c.head_width ** -0.5 if c.attn_scale is None else c.attn_scale,
               logits_scaling=1.0 / c.logit_scale, embedding_multiplier=c.embed_multiplier,
               residual_multiplier=c.ffn_out_scale, mamba_expand=_expand(w), **_mamba2(w, ("norm_gated",)))
    w.check(c.attn_width == c.d_model, "head_dim", "heads * head_dim must equal d_model")
    if not moe:
        return dict(out, num_local_experts=0, shared_intermediate_size=c.ffn_width)
    w.need("router", "topk_softmax", "top-k logits, then softmax")
    w.need("n_shared_experts", 1, "one shared MLP")
    for field, plain in (("shared_expert_gate", False), ("moe_first_dense", None), ("moe_every", 1),
                         ("expert_bias", False), ("routed_scale", 1.0), ("router_groups", 1)):
        w.need(field, plain)
    return dict(out, num_local_experts=c.n_experts, num_experts_per_tok=c.experts_per_token,
                intermediate_size=c.expert_width, shared_intermediate_size=c.shared_width,
                router_aux_loss_coef=c.aux_loss_coef)


def _falcon_h1(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", hybrid=True, scales=True, softcaps=True)
    w.silu_conv("Mamba")
    w.need("attn_softcap", None)
    w.need("logit_softcap", None)
    w.no_window()
    w.no_dropout()
    w.need("qkv_bias", False)
    _kinds(w, {(("attention", "mamba2"), "dense"): "hybrid"})
    gate = {"norm_gated": (True, False), "gate_normed": (True, True), "gate": (False, True)}
    key = 1.0 if c.attn_scale is None else c.attn_scale * math.sqrt(c.head_width)
    ssm = c.ssm_proj_scales
    return dict(_sizes(w, w.rope()), head_dim=c.head_width, **_mamba2(w, tuple(gate), multipliers=True),
                mamba_d_ssm=c.ssm_head_count * c.ssm_head_dim, hidden_act=w.act(_GATED), attention_bias=c.bias,
                mlp_bias=c.bias, projectors_bias=c.ssm_proj_bias, mamba_rms_norm=gate[c.ssm_gate][0],
                mamba_norm_before_gate=gate[c.ssm_gate][1], key_multiplier=key, attention_in_multiplier=1.0,
                attention_out_multiplier=c.attn_out_scale, ssm_in_multiplier=c.ssm_in_scale,
                ssm_out_multiplier=c.ssm_out_scale, ssm_multipliers=list(ssm) if ssm else [1.0] * 5,
                mlp_multipliers=[c.ffn_gate_scale, c.ffn_out_scale], embedding_multiplier=c.embed_multiplier,
                lm_head_multiplier=c.logit_scale)


def _period(marked: list[bool]) -> tuple[int, int] | None:
    """(period, offset) with marked[i] == (i % period == offset) for every layer, the smallest period first;
    nothing marked: a period past the last layer; None when the marks are not periodic."""
    n = len(marked)
    if not any(marked):
        return n + 1, n
    return next(((p, o) for p in range(1, n + 1) for o in range(p)
                 if all(marked[i] == (i % p == o) for i in range(n))), None)


def _jamba(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", hybrid=True, moe=True)
    w.silu_conv("Mamba")
    w.need("position", "none", "Jamba has no positional encoding")
    w.no_window()
    w.no_dropout()
    w.need("bias", False)
    w.need("qkv_bias", False)
    w.need("ssm_dt_norm", True, "Jamba normalises dt, B and C")
    w.check(c.attn_width == c.d_model, "head_dim", "heads * head_dim must equal d_model")
    w.check(c.ssm_inner_width % c.d_model == 0, "ssm_inner", "the inner width must be mamba_expand * d_model")
    _kinds(w, {(m, f): "" for m in (("mamba1",), ("attention",)) for f in ("dense", "moe")})
    specs = c.layer_specs
    attn = _period([s.mixers == ("attention",) for s in specs])
    experts = _period([s.ffn == "moe" for s in specs])
    w.check(attn is not None, "layer_types", "attention every attn_layer_period-th layer")
    w.check(experts is not None, "ffn_types", "an MoE every expert_layer_period-th layer")
    (a_per, a_off), (e_per, e_off) = attn or (1, 0), experts or (1, 0)
    out = dict(_sizes(w), hidden_act=w.act(_GATED), attn_layer_period=a_per, attn_layer_offset=a_off,
               expert_layer_period=e_per, expert_layer_offset=e_off, mamba_d_state=c.ssm_state,
               mamba_d_conv=c.ssm_conv_kernel, mamba_expand=max(1, c.ssm_inner_width // c.d_model),
               mamba_dt_rank=c.ssm_dt_rank_width, mamba_conv_bias=c.ssm_conv_bias, mamba_proj_bias=c.ssm_proj_bias)
    if c.n_experts is None:
        return dict(out, num_experts=1)
    w.need("router", "softmax_topk")
    w.need("router_renorm", False, "Jamba keeps the softmax weights of the top k as they are")
    w.need("n_shared_experts", None)
    w.check(c.expert_width == c.ffn_width, "expert_d_ff", "experts use intermediate_size")
    for field, plain in (("router_selection_bias", False), ("router_groups", 1), ("routed_scale", 1.0),
                         ("expert_bias", False)):
        w.need(field, plain)
    return dict(out, num_experts=c.n_experts, num_experts_per_tok=c.experts_per_token,
                router_aux_loss_coef=c.aux_loss_coef)


WRITERS = {"bamba": _bamba, "nemotron_h": _nemotron_h, "granitemoehybrid": _granite, "falcon_h1": _falcon_h1,
           "jamba": _jamba}
