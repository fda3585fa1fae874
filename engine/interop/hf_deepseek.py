"""DeepSeek-V3 (deepseek_v3): config.json reader and weight pairs; MLA attention (engine/layers/mla.py) and
DeepSeek's MoE (sigmoid scores, selection bias e_score_correction_bias, group-limited choice, routed scale,
first_k_dense_replace dense layers, shared experts) as transformers 5 computes them.

The multi-token-prediction layers (num_nextn_predict_layers) are not part of transformers' causal LM: read,
not built. Latent norms use rms_norm_eps (transformers fixes them at 1e-6, which is DeepSeek's rms_norm_eps).
"""
from __future__ import annotations

from typing import Any

from engine.config import ModelConfig
from engine.interop.hf_reader import _Reader
from engine.interop.hf_defaults import DEFAULTS, GATED_ACTS
from engine.interop.hf_rope import rope_fields
from engine.interop.pair import Pair

# transformers 5 DeepseekV3Config defaults (the published DeepSeek-V3 sizes)
DEFAULTS["deepseek_v3"] = dict(
    vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
    num_hidden_layers=61, num_attention_heads=128, n_shared_experts=1, n_routed_experts=256,
    routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, v_head_dim=128,
    qk_nope_head_dim=128, n_group=8, topk_group=4, num_experts_per_tok=8, first_k_dense_replace=3,
    norm_topk_prob=True, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
    tie_word_embeddings=False, rope_interleave=True, attention_bias=False, attention_dropout=0.0,
    rope_theta=10000.0)


def _deepseek_v3(r: _Reader) -> dict[str, Any]:
    d, heads = r("hidden_size"), r("num_attention_heads")
    if r("num_key_value_heads", heads) != heads:
        r.bad("num_key_value_heads", r.d["num_key_value_heads"], "MLA rebuilds keys and values for every head")
    rope_dim = r("qk_rope_head_dim")
    for key, want in (("head_dim", rope_dim), ("qk_head_dim", rope_dim + r("qk_nope_head_dim"))):
        if r.d.get(key) is not None and r(key) != want:   # derived by transformers; a stale value is refused
            r.bad(key, r.d[key], f"transformers sets it to {want}")
        r.read.add(key)
    r.expect("attention_dropout", (0, 0.0), "our dropout also acts on the residual stream")
    r.expect("attention_bias", (False,), "our `bias` would put biases on the MLP too")
    r.expect("topk_method", ("noaux_tc", None), "DeepSeek-V3 selects with the bias-corrected sigmoid scores")
    r.expect("scoring_func", ("sigmoid", None), "DeepSeek-V3 scores experts with a sigmoid")
    r.read.update({"output_router_logits", "num_nextn_predict_layers", "num_mtp_layers", "aux_loss_alpha",
                   "seq_aux", "moe_layer_freq", "ep_size"})
    if r("moe_layer_freq", 1) != 1:
        r.bad("moe_layer_freq", r.d["moe_layer_freq"], "transformers makes every layer after the dense ones MoE")
    n_layers, first_dense = r("num_hidden_layers"), r("first_k_dense_replace")
    rope = rope_fields(r, rope_dim)
    if rope.get("rope_scaling", "none") != "none":
        source = "rope_scaling" if r.d.get("rope_scaling") else "rope_parameters"
        r.bad(source, rope["rope_scaling"], "DeepSeek's YaRN also multiplies the softmax scale by "
                                            "mscale(mscale_all_dim)^2, which is not modelled yet")
    moe = dict(n_experts=r("n_routed_experts"), experts_per_token=r("num_experts_per_tok"),
               expert_d_ff=r("moe_intermediate_size"), n_shared_experts=r("n_shared_experts"),
               router="sigmoid", router_renorm=bool(r("norm_topk_prob")), router_selection_bias=True,
               router_groups=r("n_group"), router_group_topk=r("topk_group"),
               routed_scale=float(r("routed_scaling_factor")), moe_first_dense=first_dense)
    if first_dense >= n_layers:   # every layer dense: transformers builds no MoE at all
        moe = {}
        r.read.update({"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
                       "norm_topk_prob", "n_group", "topk_group", "routed_scaling_factor"})
    return dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d,
                n_layers=n_layers, n_heads=heads, d_ff=r("intermediate_size"), ffn=r.act("hidden_act", GATED_ACTS),
                norm="rmsnorm", norm_eps=float(r("rms_norm_eps")), norm_bias=False, position="rope",
                bias=False, tie_embeddings=bool(r("tie_word_embeddings")),
                kv_lora_rank=r("kv_lora_rank"), q_lora_rank=r.nullable("q_lora_rank"), qk_rope_head_dim=rope_dim,
                qk_nope_head_dim=r("qk_nope_head_dim"), v_head_dim=r("v_head_dim"),
                mla_rope_interleave=bool(r("rope_interleave")), rope_base=rope["rope_base"], **moe)


READERS = {"deepseek_v3": _deepseek_v3}


def deepseek_pairs(cfg: ModelConfig) -> list[Pair]:
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.norm", ("final_norm",), "copy")]
    attn = {"kv_a_proj_with_mqa": "kv_a", "kv_a_layernorm": "kv_norm", "kv_b_proj": "kv_b", "o_proj": "o_proj"}
    attn.update({"q_proj": "q_proj"} if cfg.q_lora_rank is None else
                {"q_a_proj": "q_a", "q_a_layernorm": "q_norm", "q_b_proj": "q_b"})
    for i, moe in enumerate(cfg.moe_layers):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs += [Pair(f"{h}self_attn.{k}", (f"{o}attn.{v}",), "copy") for k, v in attn.items()]
        pairs += [Pair(h + "input_layernorm", (o + "norm1",), "copy"),
                  Pair(h + "post_attention_layernorm", (o + "norm2",), "copy")]
        if not moe:
            pairs += [Pair(f"{h}mlp.{x}_proj", (f"{o}ffn.{x}",), "copy") for x in ("gate", "up", "down")]
            continue
        pairs += [Pair(h + "mlp.gate.weight", (o + "ffn.router.weight",), "copy", raw=True),
                  Pair(h + "mlp.gate.e_score_correction_bias", (o + "ffn.router.selection_bias",), "copy", raw=True),
                  Pair(h + "mlp.experts.gate_up_proj", (o + "ffn.experts.gate", o + "ffn.experts.up"), "halves",
                       raw=True),
                  Pair(h + "mlp.experts.down_proj", (o + "ffn.experts.down",), "copy", raw=True)]
        pairs += [Pair(f"{h}mlp.shared_experts.{x}_proj", (f"{o}ffn.shared.{x}",), "copy")
                  for x in ("gate", "up", "down")]
    return pairs
