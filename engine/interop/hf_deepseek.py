"""DeepSeek-V2 (deepseek_v2) and DeepSeek-V3 (deepseek_v3): config.json readers and weight pairs; MLA attention
(engine/layers/mla.py) and DeepSeek's MoE (engine/layers/moe.py) as transformers 5 computes them.

Both: first_k_dense_replace dense layers, then MoE layers with shared experts (one FFN of n_shared_experts times
the routed width) and routed_scaling_factor on the routed weights; YaRN's mscale_all_dim also multiplies the
softmax scale by mscale^2 (rope_mscale_all_dim). They differ in the router:
  V2  softmax over all experts; topk_method greedy (plain top-k) or group_limited_greedy (top-k inside the
      topk_group groups with the highest best score); never renormalised (transformers ignores norm_topk_prob);
      RoPE always on adjacent pairs (rope_interleave is not read).
  V3  sigmoid scores; chosen by score + e_score_correction_bias inside the groups with the highest sum of two
      best; weighted by the scores, renormalised when norm_topk_prob.
V3's multi-token-prediction modules (num_nextn_predict_layers) are not part of transformers' causal LM: read
as mtp_depth and counted apart (engine/budget/mtp.py), not built. transformers fixes the latent norms' eps at
1e-6, which is DeepSeek's rms_norm_eps; another rms_norm_eps (GLM-5's 1e-5) is read with mla_norm_eps = 1e-6.
Sparse attention (deepseek_v32, glm_moe_dsa) and the renamed DeepSeek-V3 configs (kimi_k2): hf_dsa.py.
"""
from __future__ import annotations

from typing import Any

from engine.config import ModelConfig
from engine.interop.hf_reader import _Reader
from engine.interop.hf_defaults import DEFAULTS, GATED_ACTS
from engine.interop.hf_rope import rope_fields
from engine.interop.pair import Pair, dense_mlp_pairs, norm_pairs, stacked_expert_pairs

# transformers 5 DeepseekV3Config defaults (the published DeepSeek-V3 sizes)
DEFAULTS["deepseek_v3"] = dict(
    vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
    num_hidden_layers=61, num_attention_heads=128, n_shared_experts=1, n_routed_experts=256,
    routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, v_head_dim=128,
    qk_nope_head_dim=128, n_group=8, topk_group=4, num_experts_per_tok=8, first_k_dense_replace=3,
    norm_topk_prob=True, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
    tie_word_embeddings=False, rope_interleave=True, attention_bias=False, attention_dropout=0.0,
    rope_theta=10000.0, num_nextn_predict_layers=1)
# transformers 5 DeepseekV2Config defaults (num_experts_per_tok has none: a config must give it)
DEFAULTS["deepseek_v2"] = dict(
    vocab_size=102400, hidden_size=4096, intermediate_size=11008, moe_intermediate_size=1407,
    num_hidden_layers=32, num_attention_heads=32, n_shared_experts=2, n_routed_experts=64,
    routed_scaling_factor=1.0, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, v_head_dim=128,
    qk_nope_head_dim=128, n_group=None, topk_group=None, topk_method="greedy", num_experts_per_tok=None,
    first_k_dense_replace=0, norm_topk_prob=False, hidden_act="silu", max_position_embeddings=2048,
    rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False, attention_dropout=0.0, mlp_bias=False,
    rope_theta=10000.0)


def _yarn_mscale(r: _Reader, rope: dict[str, Any]) -> float | None:
    """mscale_all_dim of the rope mapping: DeepSeek's attention multiplies its softmax scale by
    mscale(factor, mscale_all_dim)^2 whenever the RoPE type is not default (modelled for yarn only)."""
    source = "rope_scaling" if r.d.get("rope_scaling") else "rope_parameters"
    params = r.d.get(source) if isinstance(r.d.get(source), dict) else {}
    value = params.get("mscale_all_dim")
    if not value or rope.get("rope_scaling", "none") == "none":
        return None
    if rope["rope_scaling"] != "yarn":
        r.bad(f"{source}.mscale_all_dim", value, "DeepSeek's softmax correction is modelled with yarn only")
        return None
    return float(value)


def _mla(r: _Reader) -> dict[str, Any]:
    """Sizes, MLA attention, RoPE and the dense FFN, the same keys in both families."""
    d, heads = r("hidden_size"), r("num_attention_heads")
    if r("num_key_value_heads", heads) != heads:
        r.bad("num_key_value_heads", r.d["num_key_value_heads"], "MLA rebuilds keys and values for every head")
    rope_dim = r("qk_rope_head_dim")
    for key, want in (("head_dim", rope_dim), ("qk_head_dim", rope_dim + r("qk_nope_head_dim"))):
        if r.d.get(key) is not None and r(key) != want:   # derived by transformers, which overwrites the file's
            r.ignore(key, f"transformers derives it and sets it to {want}")
        r.read.add(key)
    r.expect("attention_dropout", (0.0,), "our dropout also acts on the residual stream")
    r.expect("attention_bias", (False,), "our `bias` would put biases on the MLP too")
    r.read.update({"output_router_logits", "num_nextn_predict_layers", "num_mtp_layers", "aux_loss_alpha",
                   "seq_aux", "moe_layer_freq", "ep_size"})
    if r("moe_layer_freq", 1) != 1:
        r.bad("moe_layer_freq", r.d["moe_layer_freq"], "transformers makes every layer after the dense ones MoE")
    rope = rope_fields(r, rope_dim)
    return dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d,
                n_layers=r("num_hidden_layers"), n_heads=heads, d_ff=r("intermediate_size"),
                ffn=r.act("hidden_act", GATED_ACTS), norm="rmsnorm", norm_eps=float(r("rms_norm_eps")),
                mla_norm_eps=None if float(r("rms_norm_eps")) == 1e-6 else 1e-6,   # transformers' latent norms
                position="rope", bias=False, tie_embeddings=bool(r("tie_word_embeddings")),
                kv_lora_rank=r("kv_lora_rank"), q_lora_rank=r.nullable("q_lora_rank"), qk_rope_head_dim=rope_dim,
                qk_nope_head_dim=r("qk_nope_head_dim"), v_head_dim=r("v_head_dim"),
                rope_mscale_all_dim=_yarn_mscale(r, rope), **rope)


_ROUTING_KEYS = {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
                 "norm_topk_prob", "n_group", "topk_group", "routed_scaling_factor", "topk_method", "scoring_func"}


def _experts(r: _Reader, n_layers: int) -> dict[str, Any] | None:
    """The MoE sizes both families share, or None when every layer is dense (transformers builds no MoE)."""
    first_dense = r("first_k_dense_replace")
    if first_dense >= n_layers:
        r.read.update(_ROUTING_KEYS)
        return None
    k = r("num_experts_per_tok")
    if k is None:
        r.bad("num_experts_per_tok", None, "the routed experts per token must be given")
    return dict(n_experts=r("n_routed_experts"), experts_per_token=k or 1, expert_d_ff=r("moe_intermediate_size"),
                n_shared_experts=r("n_shared_experts") or None, routed_scale=float(r("routed_scaling_factor")),
                moe_first_dense=first_dense or None)


def _deepseek_v3(r: _Reader) -> dict[str, Any]:
    base = _mla(r)
    moe = _experts(r, base["n_layers"])
    mtp = r.d.get("num_mtp_layers")   # transformers 5's name for the same key
    mtp = mtp if mtp is not None and r.d.get("num_nextn_predict_layers") is None else r("num_nextn_predict_layers")
    base["mla_rope_interleave"] = bool(r("rope_interleave"))
    if moe is None:   # the modules' blocks would be MoE (transformers' MtpModel), with no expert sizes kept here
        if mtp:
            r.ignore("num_nextn_predict_layers", "every layer is dense: its MoE prediction modules are not counted")
        return base
    base["mtp_depth"] = mtp or None
    r.expect("topk_method", ("noaux_tc", None), "DeepSeek-V3 selects with the bias-corrected sigmoid scores")
    r.expect("scoring_func", ("sigmoid", None), "DeepSeek-V3 scores experts with a sigmoid")
    return dict(base, **moe, router="sigmoid", router_renorm=bool(r("norm_topk_prob")), router_selection_bias=True,
                router_groups=r("n_group"), router_group_topk=r("topk_group"))


def _deepseek_v2(r: _Reader) -> dict[str, Any]:
    base = _mla(r)
    r.expect("mlp_bias", (False,), "DeepSeek-V2's dense and shared MLPs would have biases, its experts none")
    if "rope_interleave" in r.d:
        r.ignore("rope_interleave", "transformers' DeepSeek-V2 always rotates adjacent pairs")
    moe = _experts(r, base["n_layers"])
    base["mla_rope_interleave"] = True
    if moe is None:
        return base
    r.expect("scoring_func", ("softmax", None), "DeepSeek-V2 scores experts with a softmax")
    r.expect("norm_topk_prob", (False,), "transformers' DeepSeek-V2 router never renormalises the top-k weights")
    method = r.expect("topk_method", ("greedy", "group_limited_greedy"), "DeepSeek-V2's two top-k methods")
    groups = dict(router_groups=1, router_group_topk=1)
    r.read.update({"n_group", "topk_group"})   # greedy: transformers does not use them
    if method == "group_limited_greedy":
        n, top = r("n_group"), r("topk_group")
        if n is None or top is None:
            r.bad("n_group" if n is None else "topk_group", None, "group_limited_greedy needs n_group and topk_group")
        groups = dict(router_groups=n or 1, router_group_topk=top or 1, router_group_score="max")
    return dict(base, **moe, **groups, router="softmax_topk", router_renorm=False, router_selection_bias=False)


READERS = {"deepseek_v2": _deepseek_v2, "deepseek_v3": _deepseek_v3}


def mla_pairs(cfg: ModelConfig, a: str, o: str) -> list[Pair]:
    """One MLA layer: transformers' names under `a` (…self_attn.) <-> ours under `o` (blocks.i.attn.)."""
    attn = {"kv_a_proj_with_mqa": "kv_a", "kv_a_layernorm": "kv_norm", "kv_b_proj": "kv_b", "o_proj": "o_proj"}
    attn.update({"q_proj": "q_proj"} if cfg.q_lora_rank is None else
                {"q_a_proj": "q_a", "q_a_layernorm": "q_norm", "q_b_proj": "q_b"})
    return [Pair(a + k, (f"{o}{v}",), "copy") for k, v in attn.items()]


def deepseek_ffn_pairs(cfg: ModelConfig, h: str, o: str, moe: bool) -> list[Pair]:
    """One layer's dense MLP or DeepSeek MoE (router, fused experts, selection bias and shared experts if any)."""
    if not moe:
        return dense_mlp_pairs(h, o)
    pairs = [Pair(h + "mlp.gate.weight", (o + "ffn.router.weight",), "copy", raw=True), *stacked_expert_pairs(h, o)]
    if cfg.router_selection_bias:   # DeepSeek-V3 and Kimi Linear
        pairs.append(Pair(h + "mlp.gate.e_score_correction_bias", (o + "ffn.router.selection_bias",), "copy",
                          raw=True))
    if cfg.n_shared_experts:
        pairs += [Pair(f"{h}mlp.shared_experts.{x}_proj", (f"{o}ffn.shared.{x}",), "copy")
                  for x in ("gate", "up", "down")]
    return pairs


def deepseek_pairs(cfg: ModelConfig) -> list[Pair]:
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.norm", ("final_norm",), "copy")]
    for i, moe in enumerate(cfg.moe_layers):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs += mla_pairs(cfg, h + "self_attn.", o + "attn.")
        if cfg.layer_indexer(i):   # sparse attention's lightning indexer (hf_dsa.py), same names both sides
            pairs += [Pair(f"{h}self_attn.indexer.{x}", (f"{o}attn.indexer.{x}",), "copy")
                      for x in ("wq_b", "wk", "k_norm", "weights_proj")]
        pairs += norm_pairs(h, o) + deepseek_ffn_pairs(cfg, h, o, moe)
    return pairs
