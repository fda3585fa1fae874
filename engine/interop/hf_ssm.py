"""State-space hybrid families (bamba, nemotron_h, granitemoehybrid, falcon_h1, jamba): config.json readers.

Registered into hf_config's readers; weights in hf_ssm_pairs.py, written back by hf_ssm_export.py. How each
family lays out its layers, as transformers 5 builds them:
  bamba             Mamba-2 everywhere but `attn_layer_indices`; a SwiGLU MLP after every mixer; RoPE on half
                    of each head (partial_rotary_factor fixed at 0.5)
  nemotron_h        one mixer per layer (`hybrid_override_pattern` M * - E, or `layers_block_type`), each with its
                    own pre-norm: Mamba-2, attention (no RoPE), a relu2 MLP, or a DeepSeek-V3-routed MoE
  granitemoehybrid  `layer_types` mamba / attention, then an MoE with a shared expert (or the shared MLP alone
                    without experts); embedding, attention, residual and logit multipliers
  falcon_h1         attention and Mamba-2 side by side in every layer (their outputs added), then a SwiGLU MLP;
                    muP multipliers on the embedding, every branch and the head
  jamba             Mamba-1 but every attn_layer_period-th layer (from attn_layer_offset), an MoE every
                    expert_layer_period-th (from expert_layer_offset), no positional encoding
Every mixer's conv runs the family's hidden activation (mamba_hidden_act for Nemotron-H): only silu is modelled.
Pure stdlib: reading a config needs no transformers.
"""
from __future__ import annotations

import math
from typing import Any

from engine.interop.hf_reader import _decoder, _Reader

_MAMBA_KEYS = ("mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv", "mamba_expand",
               "mamba_chunk_size", "mamba_conv_bias", "mamba_proj_bias", "time_step_limit")
_NEMOTRON_KINDS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_NEMOTRON_NAMES = {"mamba": "mamba", "linear_attention": "mamba", "attention": "attention",
                   "full_attention": "attention", "mlp": "mlp", "moe": "moe"}
# our layer_types / ffn_types of each Nemotron-H layer kind
_NEMOTRON_LAYER = {"mamba": ("mamba2", "none"), "attention": ("full", "none"), "mlp": ("none", "dense"),
                   "moe": ("none", "moe")}


def _silu_conv(r: _Reader, key: str) -> None:
    """The mixers' conv runs this activation; transformers' torch path applies it as ACT2FN[...]. Bamba's, Granite's,
    Falcon-H1's and Jamba's MLPs apply the same hidden_act: a SwiGLU once it is silu (one refusal, not two)."""
    r.expect(key, ("silu", "swish"), "the Mamba conv's activation: only silu is modelled")


def _dt_limits(r: _Reader, key: str = "time_step_limit") -> dict[str, Any]:
    """transformers' time_step_limit [lo, hi] (JSON may spell hi Infinity, which Python's json reads as inf)."""
    limit = r(key)
    if not isinstance(limit, (list, tuple)) or len(limit) != 2 or not all(isinstance(v, (int, float))
                                                                          and not isinstance(v, bool) for v in limit):
        r.bad(key, limit, "two numbers [min, max]")
        return {}
    lo, hi = float(limit[0]), float(limit[1])
    if not math.isfinite(lo) or lo < 0 or not hi > lo:
        r.bad(key, limit, "0 <= min < max")
        return {}
    return dict(ssm_dt_min=lo, ssm_dt_max=None if math.isinf(hi) else hi)


def _mamba2(r: _Reader, d: int, inner: int | None = None) -> dict[str, Any]:
    """Bamba / Granite / Falcon-H1 spelling of the Mamba-2 mixer (mamba_* keys); inner: mamba_d_ssm when set."""
    heads, expand = r("mamba_n_heads"), r("mamba_expand")
    source = "mamba_expand * hidden_size" if inner is None else "mamba_d_ssm"
    inner = expand * d if inner is None else inner
    head_dim = r("mamba_d_head")
    head_dim = inner // heads if head_dim == "auto" else head_dim
    if min(heads, head_dim, d) > 0 and heads * head_dim != inner:   # a size below 1: ModelConfig names it
        r.bad("mamba_n_heads", heads, f"heads * mamba_d_head ({head_dim}) must be the inner width {inner} ({source})")
    return dict(ssm_heads=heads, ssm_head_dim=head_dim, ssm_groups=r("mamba_n_groups"), ssm_state=r("mamba_d_state"),
                ssm_conv_kernel=r("mamba_d_conv"), ssm_chunk=r("mamba_chunk_size"),
                ssm_conv_bias=bool(r("mamba_conv_bias")), ssm_proj_bias=bool(r("mamba_proj_bias")), **_dt_limits(r))


def _same_bias(r: _Reader) -> bool:
    attn, mlp = r("attention_bias"), r("mlp_bias")
    if bool(attn) != bool(mlp):
        r.bad("attention_bias", attn, f"with mlp_bias={mlp}: our `bias` covers attention and MLP alike")
    return bool(attn)


def _bamba(r: _Reader) -> dict[str, Any]:
    d = r("hidden_size")
    _silu_conv(r, "hidden_act")
    r.expect("partial_rotary_factor", (None, 0.5), "Bamba fixes RoPE to half of each head")
    base = _decoder(r, partial_ok=True)
    base["rope_fraction"] = 0.5 if "partial_rotary_factor" not in (r.d.get("rope_parameters") or {}) else \
        base["rope_fraction"]
    n, attn = base["n_layers"], r("attn_layer_indices") or []
    if not isinstance(attn, list) or any(not isinstance(i, int) or not 0 <= i < n for i in attn):
        r.bad("attn_layer_indices", attn, f"layer indices in 0..{n - 1}")
        attn = []
    r.read.update({"num_logits_to_keep", "z_loss_coefficient"})   # generation / a training loss: no forward change
    return dict(base, **_mamba2(r, d), ffn="swiglu", bias=_same_bias(r),
                layer_types=tuple("full" if i in attn else "mamba2" for i in range(n)))


def nemotron_layers(pattern: str) -> dict[str, tuple[str, ...]]:
    """layer_types and ffn_types of a Nemotron-H hybrid_override_pattern (M Mamba-2, * attention, - MLP, E MoE)."""
    return _as_layers([_NEMOTRON_KINDS[c] for c in pattern])


def _as_layers(kinds: list[str]) -> dict[str, tuple[str, ...]]:
    return dict(layer_types=tuple(_NEMOTRON_LAYER[k][0] for k in kinds),
                ffn_types=tuple(_NEMOTRON_LAYER[k][1] for k in kinds))


def _nemotron_kinds(r: _Reader) -> list[str]:
    """Each layer's kind (mamba / attention / mlp / moe) from layers_block_type or hybrid_override_pattern."""
    listed = r.nullable("layers_block_type") or r.nullable("layer_types")
    r.read.update({"layers_block_type", "layer_types", "hybrid_override_pattern", "num_hidden_layers"})
    if listed is not None:
        if not isinstance(listed, list) or any(k not in _NEMOTRON_NAMES for k in listed):
            r.bad("layers_block_type", listed, f"entries of {', '.join(_NEMOTRON_NAMES)}")
            return ["mamba"]
        return [_NEMOTRON_NAMES[k] for k in listed]
    pattern = r.d.get("hybrid_override_pattern")
    if pattern is None:   # transformers' default: one of each
        return ["mamba", "moe", "attention", "mlp"]
    if not isinstance(pattern, str) or not pattern or set(pattern) - set(_NEMOTRON_KINDS):
        r.bad("hybrid_override_pattern", pattern, "a string of M (Mamba-2), * (attention), - (MLP), E (MoE)")
        return ["mamba"]
    return [_NEMOTRON_KINDS[c] for c in pattern]


def _nemotron_h(r: _Reader) -> dict[str, Any]:
    kinds = _nemotron_kinds(r)
    n, d, heads = len(kinds), r("hidden_size"), r("num_attention_heads")
    _silu_conv(r, "mamba_hidden_act")
    r.expect("moe_latent_size", (None,), "experts running in a latent width are not modelled")
    r.expect("num_nextn_predict_layers", (0,), "Nemotron-H's multi-token-prediction layers are not modelled")
    r.expect("attention_dropout", (0.0,), "our dropout also acts on the residual stream")
    r.expect("hidden_dropout", (0.0,), "our dropout also acts on the residual stream")
    r.expect("mlp_bias", (r("attention_bias"),), f"with attention_bias={r('attention_bias')}: our `bias` covers both")
    kv, hd = r("num_key_value_heads", heads), r("head_dim", d // heads)
    if "attention_head_dim" in r.d:   # the remote-code spelling of head_dim, which transformers never reads
        r.expect("attention_head_dim", (hd,), f"transformers builds head_dim {hd} whatever this says")
    for key, why in (("rms_norm_eps", "transformers' Nemotron-H reads layer_norm_epsilon"),
                     ("norm_eps", "transformers' Nemotron-H reads layer_norm_epsilon"),
                     ("rope_theta", "transformers' Nemotron-H attention has no RoPE"),
                     ("partial_rotary_factor", "transformers' Nemotron-H attention has no RoPE")):
        if key in r.d:
            r.ignore(key, why)
    out = dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d, n_layers=n,
               n_heads=heads, n_kv_heads=None if kv == heads else kv, head_dim=None if hd == d // heads else hd,
               d_ff=r("intermediate_size"), ffn=r.act("mlp_hidden_act", {"relu2": "relu2"}), position="none",
               norm="rmsnorm", norm_eps=float(r("layer_norm_epsilon")), bias=bool(r("attention_bias")),
               tie_embeddings=bool(r("tie_word_embeddings")),
               **_as_layers(kinds),
               ssm_heads=r("mamba_num_heads"), ssm_head_dim=r("mamba_head_dim"), ssm_groups=r("n_groups"),
               ssm_state=r("ssm_state_size"), ssm_conv_kernel=r("conv_kernel"), ssm_chunk=r("chunk_size"),
               ssm_conv_bias=bool(r("use_conv_bias")), ssm_proj_bias=bool(r("use_bias")),
               # the mixer clamps dt from below at time_step_min (transformers' NemotronHMamba2Mixer), not at
               # time_step_limit, which it never reads
               ssm_dt_min=float(r("time_step_min")), ssm_dt_max=None,
               state_dtype={"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(
                   r("mamba_ssm_cache_dtype"), None))
    # mamba_expand: the config class renames it to expand, which the torch path never reads (the inner width is
    # mamba_num_heads * mamba_head_dim); time_step_rank: remote code's, not a transformers key
    for key in ("time_step_limit", "time_step_max", "time_step_floor", "expand", "mamba_expand", "time_step_rank",
                "mamba_proj_bias", "residual_in_fp32",
                "rescale_prenorm_residual", "use_mamba_kernels", "num_logits_to_keep", "moe_shared_expert_overlap",
                "mtp_layers_block_type", "sliding_window", "output_router_logits"):
        r.read.add(key)   # init, kernels, bookkeeping or keys the torch path never reads
    if "moe" in kinds:
        out.update(n_experts=r("n_routed_experts"), experts_per_token=r("num_experts_per_tok"),
                   expert_d_ff=r("moe_intermediate_size"), n_shared_experts=1 if r("n_shared_experts") else None,
                   shared_d_ff=r("moe_shared_expert_intermediate_size"), router="sigmoid",
                   router_selection_bias=True, router_renorm=bool(r("norm_topk_prob")),
                   router_groups=r("n_group"), router_group_topk=r("topk_group"),
                   routed_scale=float(r("routed_scaling_factor")))
    else:
        r.read.update({"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
                       "moe_shared_expert_intermediate_size", "norm_topk_prob", "n_group", "topk_group",
                       "routed_scaling_factor"})
    return out


def _granite(r: _Reader) -> dict[str, Any]:
    d = r("hidden_size")
    _silu_conv(r, "hidden_act")
    if "init_method" in r.d:
        r.ignore("init_method", "initialization only; transformers' GraniteMoeHybrid never reads it")
    if "normalization_function" in r.d:   # IBM's own key; transformers always builds RMSNorm
        r.expect("normalization_function", ("rmsnorm",), "transformers' GraniteMoeHybrid norms are RMSNorm")
    rope = r("position_embedding_type")
    if rope not in (None, "rope", "nope"):
        r.bad("position_embedding_type", rope, "rope, nope or null (no RoPE)")
    base = _decoder(r)
    if rope != "rope":
        base = {k: v for k, v in base.items() if not k.startswith("rope_")}
        base["position"] = "none"
    n = base["n_layers"]
    kinds = r("layer_types") or ["mamba"] * n
    names = {"mamba": "mamba2", "linear_attention": "mamba2", "attention": "full", "full_attention": "full"}
    if not isinstance(kinds, list) or len(kinds) != n or any(k not in names for k in kinds):
        r.bad("layer_types", kinds, f"{n} entries of mamba / attention")
        kinds = ["mamba"] * n
    r.read.update({"layers_block_type", "output_router_logits"})
    experts, scale = r("num_local_experts"), float(r("residual_multiplier"))
    r.expect("attention_bias", (False,), "GraniteMoeHybrid puts it on q, k, v and o but not the MLP; our `bias` "
                                         "covers both")
    out = dict(base, **_mamba2(r, d), ffn="swiglu", bias=False,
               layer_types=tuple(names[k] for k in kinds), attn_scale=float(r("attention_multiplier")),
               logit_scale=1.0 / float(r("logits_scaling")), embed_multiplier=float(r("embedding_multiplier")),
               attn_out_scale=scale, ssm_out_scale=scale, ffn_out_scale=scale)
    if not experts:   # the shared MLP alone is the layer's FFN (granite-4.0-h-micro)
        r.read.update({"num_experts_per_tok", "intermediate_size", "router_aux_loss_coef"})
        return dict(out, d_ff=r("shared_intermediate_size"))
    return dict(out, n_experts=experts, experts_per_token=r("num_experts_per_tok"), expert_d_ff=r("intermediate_size"),
                n_shared_experts=1, shared_d_ff=r("shared_intermediate_size"), router="topk_softmax",
                aux_loss_coef=float(r("router_aux_loss_coef")))


def _falcon_h1(r: _Reader) -> dict[str, Any]:
    d = r("hidden_size")
    _silu_conv(r, "hidden_act")
    base = _decoder(r)
    heads, kmul = base["n_heads"], float(r("key_multiplier"))
    hd = base["head_dim"] or d // heads
    a_in, a_out = float(r("attention_in_multiplier")), float(r("attention_out_multiplier"))
    if r("attention_bias") and a_in != 1.0:
        r.bad("attention_in_multiplier", a_in, "with attention biases the input scale does not factor out")
    if bool(r("mamba_proj_bias")) != bool(r("projectors_bias")):
        r.bad("projectors_bias", r("projectors_bias"), "our ssm_proj_bias covers Mamba's in_proj and out_proj alike")
    if r("mamba_rms_norm"):
        gate = "gate_normed" if r("mamba_norm_before_gate") else "norm_gated"
    else:
        gate = "gate"
        r.read.add("mamba_norm_before_gate")
    mlp = r("mlp_multipliers") or [1.0, 1.0]
    ssm = r("ssm_multipliers")
    r.read.add("num_logits_to_keep")
    # q.k of scaled inputs and a scaled key: (a_in q).(a_in k_mult k) = a_in^2 k_mult q.k; values scale by a_in
    return dict(base, **_mamba2(r, d, r.nullable("mamba_d_ssm")), ffn="swiglu",
                bias=_same_bias(r), layer_types=("full+mamba2",) * base["n_layers"], ssm_gate=gate,
                attn_scale=None if kmul * a_in ** 2 == 1.0 else kmul * a_in ** 2 / math.sqrt(hd),
                attn_out_scale=a_in * a_out, ssm_in_scale=float(r("ssm_in_multiplier")),
                ssm_out_scale=float(r("ssm_out_multiplier")),
                ssm_proj_scales=None if not ssm or all(s == 1.0 for s in ssm) else tuple(float(s) for s in ssm),
                ffn_gate_scale=float(mlp[0]), ffn_out_scale=float(mlp[1]),
                embed_multiplier=float(r("embedding_multiplier")), logit_scale=float(r("lm_head_multiplier")))


def _jamba(r: _Reader) -> dict[str, Any]:
    d = r("hidden_size")
    _silu_conv(r, "hidden_act")
    r.expect("sliding_window", (None,), "Jamba's attention here is full")
    base = {k: v for k, v in _decoder(r).items() if not k.startswith("rope_")}
    for key in ("rope_theta", "rope_parameters", "rope_scaling", "partial_rotary_factor"):
        r.read.discard(key)   # Jamba has no positional encoding: these keys are unknown to it
    n, experts = base["n_layers"], r("num_experts")
    a_per, a_off, e_per, e_off = (r(k) for k in ("attn_layer_period", "attn_layer_offset", "expert_layer_period",
                                                 "expert_layer_offset"))
    rank = r("mamba_dt_rank")
    r.read.update({"use_mamba_kernels", "use_mambapy", "use_associative_scan", "num_logits_to_keep",
                   "output_router_logits"})
    out = dict(base, position="none", ffn="swiglu", bias=False,
               layer_types=tuple("full" if i % a_per == a_off else "mamba1" for i in range(n)),
               ssm_inner=r("mamba_expand") * d, ssm_state=r("mamba_d_state"), ssm_conv_kernel=r("mamba_d_conv"),
               ssm_dt_rank=math.ceil(d / 16) if rank == "auto" else rank, ssm_dt_norm=True,
               ssm_conv_bias=bool(r("mamba_conv_bias")), ssm_proj_bias=bool(r("mamba_proj_bias")))
    r.read.update({"num_experts_per_tok", "router_aux_loss_coef"})   # one expert: a plain MLP in every layer
    if experts > 1:
        out.update(ffn_types=tuple("moe" if i % e_per == e_off else "dense" for i in range(n)), n_experts=experts,
                   experts_per_token=r("num_experts_per_tok"), router="softmax_topk", router_renorm=False,
                   aux_loss_coef=float(r("router_aux_loss_coef")))
    return out


READERS = {"bamba": _bamba, "nemotron_h": _nemotron_h, "granitemoehybrid": _granite, "falcon_h1": _falcon_h1,
           "jamba": _jamba}
