"""config.json readers of the 2025-26 mixture-of-experts families, as transformers 5.24 builds them: glm4_moe,
dots1, ernie4_5_moe and qwen3_vl_moe_text (Qwen3-VL-MoE's language model, read through hf_wrappers.py).

  glm4_moe   GQA with biases on q, k, v (not o), partial RoPE (half of each head by default), optional per-head
             QK-norm; DeepSeek-V3's MoE (sigmoid scores, selection bias, groups, routed_scaling_factor, shared
             experts of n_shared_experts times the routed width, first_k_dense_replace dense layers) and its
             multi-token-prediction modules (num_nextn_predict_layers, counted apart as mtp_depth)
  dots1      Qwen3 attention (per-head QK-norm, windows from layer_types / max_window_layers) with DeepSeek-V3's MoE
  ernie4_5_moe  RoPE on adjacent pairs (weights permuted on import); softmax over all experts, chosen by
             probability + a frozen per-expert bias (a parameter: it counts), renormalised; MoE on layers
             start..end every interval (end must be the last layer), shared experts of the routed width
  qwen3_vl_moe_text  Qwen3-MoE with M-RoPE (plain RoPE for text alone) and always renormalised top-k weights
"""
from __future__ import annotations

from typing import Any

from engine.config import ModelConfig
from engine.interop.hf_defaults import _MOE, DEFAULTS, GATED_ACTS
from engine.interop.hf_moe import _sparse_layers
from engine.interop.hf_reader import _decoder, _layer_windows, _Reader
from engine.interop.hf_recent import strip_mrope
from engine.interop.pair import Pair, dense_mlp_pairs, norm_pairs, stacked_expert_pairs

DEFAULTS.update({
    "glm4_moe": dict(_MOE, vocab_size=151552, hidden_size=4096, intermediate_size=10944, num_hidden_layers=46,
                     num_attention_heads=96, num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5,
                     attention_bias=False, moe_intermediate_size=1408, num_experts_per_tok=8, n_shared_experts=1,
                     n_routed_experts=128, routed_scaling_factor=1.0, n_group=1, topk_group=1,
                     first_k_dense_replace=1, norm_topk_prob=True, use_qk_norm=False, num_nextn_predict_layers=1,
                     partial_rotary_factor=0.5),
    "dots1": dict(_MOE, vocab_size=152064, hidden_size=4608, intermediate_size=10944, moe_intermediate_size=1408,
                  num_hidden_layers=62, num_attention_heads=32, num_key_value_heads=32, n_shared_experts=None,
                  n_routed_experts=None, n_group=1, topk_group=1, num_experts_per_tok=None, first_k_dense_replace=0,
                  norm_topk_prob=False, max_position_embeddings=2048, rms_norm_eps=1e-6, attention_bias=False,
                  routed_scaling_factor=1.0, sliding_window=4096, max_window_layers=62, layer_types=None),
    "ernie4_5_moe": dict(_MOE, vocab_size=103424, hidden_size=2560, intermediate_size=12288, num_hidden_layers=28,
                         num_attention_heads=20, num_key_value_heads=4, max_position_embeddings=131072,
                         rms_norm_eps=1e-5, tie_word_embeddings=True, use_bias=False, moe_intermediate_size=1536,
                         moe_k=6, moe_num_experts=64, moe_num_shared_experts=2, moe_layer_start_index=1,
                         moe_layer_end_index=-1, moe_layer_interval=1, moe_norm_min=1e-12, rope_theta=500000.0,
                         router_aux_loss_coef=0.001),
    "qwen3_vl_moe_text": dict(_MOE, vocab_size=151936, hidden_size=2048, intermediate_size=5632,
                              num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16,
                              max_position_embeddings=128000, rms_norm_eps=1e-6, tie_word_embeddings=True,
                              attention_bias=False, decoder_sparse_step=1, moe_intermediate_size=1408,
                              num_experts_per_tok=4, num_experts=60, mlp_only_layers=[], rope_theta=500000.0,
                              router_aux_loss_coef=0.001),
})
_UNREAD = {   # keys of the published files that these config classes do not have
    "topk_method": "DeepSeek-V3's MoE here always selects with the bias-corrected sigmoid scores",
    "scoring_func": "DeepSeek-V3's MoE here always scores experts with a sigmoid",
    "moe_layer_freq": "every layer after first_k_dense_replace is MoE",
    "use_sliding_window": "the windows follow layer_types (sliding_window, max_window_layers)",
    "norm_topk_prob": "Qwen3-VL-MoE always renormalises the top-k weights",
}


def _unread(r: _Reader, keys: tuple[str, ...]) -> None:
    for key in keys:
        if key in r.d:
            r.ignore(key, _UNREAD[key])


def _deepseek_moe(r: _Reader, n_layers: int) -> dict[str, Any] | None:
    """DeepSeek-V3's MoE under the names Glm4Moe and Dots1 share, or None for an all-dense model."""
    first = r("first_k_dense_replace")
    experts, k = r("n_routed_experts"), r("num_experts_per_tok")
    unused = {"moe_intermediate_size", "n_shared_experts", "routed_scaling_factor", "n_group", "topk_group",
              "norm_topk_prob"}   # read, not reported unknown, when no MoE layer is built from them
    if first >= n_layers:
        r.read.update(unused)
        return None
    if experts is None or k is None:
        r.bad("n_routed_experts" if experts is None else "num_experts_per_tok", None,
              "transformers cannot build the MoE layers without it")
        r.read.update(unused)   # the refusal is the one problem: the other MoE keys are not unknown
        return None
    groups = r("n_group")
    r.read.update({"topk_group", "output_router_logits"})
    return dict(n_experts=experts, experts_per_token=k, expert_d_ff=r("moe_intermediate_size"),
                n_shared_experts=r("n_shared_experts") or None, routed_scale=float(r("routed_scaling_factor")),
                moe_first_dense=first or None, router="sigmoid", router_renorm=bool(r("norm_topk_prob")),
                router_selection_bias=True, router_groups=groups,
                router_group_topk=r("topk_group") if groups > 1 else 1)


def _mtp(r: _Reader) -> int | None:
    """num_nextn_predict_layers, or transformers 5's name for it (num_mtp_layers), as mtp_depth."""
    r.read.update({"num_nextn_predict_layers", "num_mtp_layers"})
    value = r.d.get("num_mtp_layers") if r.d.get("num_nextn_predict_layers") is None else r.d["num_nextn_predict_layers"]
    value = r.defaults.get("num_nextn_predict_layers") if value is None else value
    return value or None


def _glm4_moe(r: _Reader) -> dict[str, Any]:
    base = _decoder(r, partial_ok=True, fraction_default=DEFAULTS["glm4_moe"]["partial_rotary_factor"])
    _unread(r, ("topk_method", "scoring_func", "moe_layer_freq"))
    moe = _deepseek_moe(r, base["n_layers"])
    out = dict(base, ffn=r.act("hidden_act", GATED_ACTS), bias=False, qkv_bias=bool(r("attention_bias")),
               qk_norm=bool(r("use_qk_norm")))
    if moe is None:
        r.read.add("num_nextn_predict_layers")
        return out
    return dict(out, **moe, mtp_depth=_mtp(r))


def _dots1(r: _Reader) -> dict[str, Any]:
    base = _decoder(r)
    _unread(r, ("topk_method", "scoring_func", "moe_layer_freq", "use_sliding_window"))
    r.expect("attention_bias", (False,), "Dots1 puts it on q, k, v and o but not the MLP")
    n, window = base["n_layers"], r.nullable("sliding_window")
    first = r("max_window_layers")
    default = ["sliding_attention" if window is not None and i >= first else "full_attention" for i in range(n)]
    moe = _deepseek_moe(r, n) or {}
    return dict(base, **_layer_windows(r, n, window, default), **moe, ffn=r.act("hidden_act", GATED_ACTS), bias=False,
                qk_norm=True)


def _ernie4_5_moe(r: _Reader) -> dict[str, Any]:
    """RoPE on pairs (2i, 2i+1): the weights are permuted to our rotate-half order on import."""
    base = _decoder(r)
    n = base["n_layers"]
    r.expect("use_bias", (False,), "ERNIE's shared experts would carry biases and its routed experts none")
    start, end, every = r("moe_layer_start_index"), r("moe_layer_end_index"), r("moe_layer_interval")
    end = n - 1 if end == -1 else end
    if end < n - 1:
        r.bad("moe_layer_end_index", end, f"MoE layers run to the last layer ({n - 1}) in our models")
    if r("moe_norm_min") > 1e-6:   # the renormalising sum's floor: unreachable for top-k softmax weights below it
        r.bad("moe_norm_min", r("moe_norm_min"), "a floor on the renormalised weights' sum is not modelled")
    shared = r("moe_num_shared_experts")
    moe = dict(n_experts=r("moe_num_experts"), experts_per_token=r("moe_k"), expert_d_ff=r("moe_intermediate_size"),
               n_shared_experts=shared or None, moe_first_dense=start or None, moe_every=every,
               router="softmax_topk", router_renorm=True, router_selection_bias=True, selection_bias_parameter=True,
               aux_loss_coef=float(r("router_aux_loss_coef")))
    r.read.add("output_router_logits")
    return dict(base, **moe, ffn=r.act("hidden_act", GATED_ACTS), bias=False)


def _qwen3_vl_moe_text(r: _Reader) -> dict[str, Any]:
    strip_mrope(r)
    base = _decoder(r)
    _unread(r, ("norm_topk_prob",))
    if "sliding_window" in r.d:   # the config class sets it to null whatever the file says
        r.ignore("sliding_window", "Qwen3-VL-MoE has no sliding windows (its config class sets it to null)")
    # num_local_experts is the class's name for num_experts (given both, it wins), as in Qwen3-MoE
    key = "num_local_experts" if "num_local_experts" in r.d else "num_experts"
    r.read.update({"num_experts", "num_local_experts"})
    r.expect("attention_bias", (False,), "Qwen3 puts it on q, k, v and o but not the MLP")
    r.read.add("output_router_logits")
    return dict(base, n_experts=r(key), experts_per_token=r("num_experts_per_tok"),
                expert_d_ff=r("moe_intermediate_size"), router="softmax_topk", router_renorm=True,
                aux_loss_coef=float(r("router_aux_loss_coef")), **_sparse_layers(r, base["n_layers"]),
                ffn=r.act("hidden_act", GATED_ACTS), bias=False, qk_norm=True)


READERS = {"glm4_moe": _glm4_moe, "dots1": _dots1, "ernie4_5_moe": _ernie4_5_moe,
           "qwen3_vl_moe_text": _qwen3_vl_moe_text}


def recent_moe_pairs(cfg: ModelConfig, family: str) -> list[Pair]:
    """GQA attention with Llama's names (ERNIE rotates pairs 2i, 2i+1: q and k permuted) and DeepSeek-style MoE
    layers: mlp.gate (router weight and selection bias; ERNIE's bias [1, E] under gate.moe_statics), stacked
    experts gate_up_proj [E, 2f, d] and down_proj [E, d, f], shared experts mlp.shared_experts."""
    ernie = family == "ernie4_5_moe"
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.norm", ("final_norm",), "copy")]
    bias = ("mlp.gate.moe_statics.e_score_correction_bias", "row") if ernie else ("mlp.gate.e_score_correction_bias",
                                                                                   "copy")
    for i, moe in enumerate(cfg.moe_layers):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs += [Pair(f"{h}self_attn.{x}_proj", (f"{o}attn.{x}_proj",), f"rope_pairs_{x}" if ernie else "copy")
                  for x in "qk"]
        pairs += [Pair(f"{h}self_attn.{x}_proj", (f"{o}attn.{x}_proj",), "copy") for x in "vo"]
        pairs += [Pair(f"{h}self_attn.{x}_norm", (f"{o}attn.{x}_norm",), "copy") for x in "qk" if cfg.qk_norm]
        pairs += norm_pairs(h, o)
        if not moe:
            pairs += dense_mlp_pairs(h, o)
            continue
        pairs += [Pair(h + "mlp.gate.weight", (o + "ffn.router.weight",), "copy", raw=True),
                  Pair(h + bias[0], (o + "ffn.router.selection_bias",), bias[1], raw=True), *stacked_expert_pairs(h, o)]
        if cfg.n_shared_experts:
            pairs += [Pair(f"{h}mlp.shared_experts.{x}_proj", (f"{o}ffn.shared.{x}",), "copy")
                      for x in ("gate", "up", "down")]
    return pairs
