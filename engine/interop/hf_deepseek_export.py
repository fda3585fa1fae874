"""ModelConfig -> deepseek_v3, deepseek_v2, deepseek_v32 or glm_moe_dsa config.json; the inverse of hf_deepseek.py's
and hf_dsa.py's readers. A model with MLA attention, a gated FFN and, if any, DeepSeek's MoE: every layer after the
first dense ones MoE, shared experts of the routed width; V3 (and V3.2, GLM-5) routes with sigmoid scores and a
selection bias, V2 with a softmax, plain or inside the groups with the best expert (never renormalised). V3.2 and
GLM-5 add sparse attention: V3.2's indexer rotates halves, GLM-5's adjacent pairs and may share an indexer."""
from __future__ import annotations

from typing import Any

from engine.interop.hf_writer import _GATED, _Writer


def _mla(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", moe=True, mla=True, mtp=w.family != "deepseek_v2", dsa=w.family in DSA)
    w.check(c.mla, "kv_lora_rank", f"{w.family} attention is MLA")
    w.need("block", "serial")
    w.need("bias", False, "DeepSeek's attention_bias leaves the MLP without biases")
    w.need("mla_norm_eps" if c.mla_norm_eps is not None else "norm_eps", 1e-6,
           "transformers keeps the latent norms at eps 1e-6")
    w.need("position", "rope", "DeepSeek rotates the decoupled key")
    w.no_dropout()
    return dict(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.ffn_width,
                num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.n_heads,
                rms_norm_eps=c.norm_eps, tie_word_embeddings=c.tie_embeddings, attention_dropout=0.0,
                attention_bias=False, hidden_act=w.act(_GATED), kv_lora_rank=c.kv_lora_rank,
                q_lora_rank=c.q_lora_rank, qk_rope_head_dim=c.qk_rope_head_dim, qk_nope_head_dim=c.qk_nope_head_dim,
                v_head_dim=c.v_head_dim, **w.rope())


def _experts(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.need("moe_every", 1, "every layer after the dense ones is MoE")
    w.need("expert_bias", False)
    w.need("shared_expert_gate", False)
    w.check((c.n_shared_experts or 0) >= 1, "n_shared_experts", f"{w.family} always builds shared experts")
    w.check(c.shared_d_ff in (None, c.expert_width), "shared_d_ff", "shared experts have the routed width")
    return dict(n_routed_experts=c.n_experts, num_experts_per_tok=c.experts_per_token,
                moe_intermediate_size=c.expert_width, n_shared_experts=c.n_shared_experts,
                first_k_dense_replace=c.moe_first_dense or 0, routed_scaling_factor=c.routed_scale)


def _deepseek_v3(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    out = dict(_mla(w), num_nextn_predict_layers=c.mtp_depth or 0)
    if w.family in DSA:   # transformers' sparse-attention MLA always rotates adjacent pairs
        w.need("mla_rope_interleave", True, f"{w.family} always rotates adjacent pairs")
        out.update(_indexer(w))
    else:
        out["rope_interleave"] = c.mla_rope_interleave
    if c.n_experts is None:   # every layer dense
        return dict(out, first_k_dense_replace=c.n_layers)
    w.need("router", "sigmoid", "DeepSeek-V3 scores experts with a sigmoid")
    w.need("router_selection_bias", True, "DeepSeek-V3 always has e_score_correction_bias")
    if c.router_groups > 1:
        w.need("router_group_score", "top2_sum", "DeepSeek-V3 scores a group by its two best experts")
    return dict(out, **_experts(w), n_group=c.router_groups, topk_group=c.router_group_topk,
                norm_topk_prob=c.router_renorm)


def _deepseek_v2(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.need("mla_rope_interleave", True, "DeepSeek-V2 always rotates adjacent pairs")
    out = dict(_mla(w), mlp_bias=False)
    if c.n_experts is None:
        return dict(out, first_k_dense_replace=c.n_layers)
    w.need("router", "softmax_topk", "DeepSeek-V2 takes the top-k of a softmax over all experts")
    w.need("router_renorm", False, "transformers' DeepSeek-V2 never renormalises the top-k weights")
    w.need("router_selection_bias", False)
    grouped = c.router_groups > 1
    if grouped:
        w.need("router_group_score", "max", "DeepSeek-V2 scores a group by its best expert")
    return dict(out, **_experts(w), topk_method="group_limited_greedy" if grouped else "greedy",
                n_group=c.router_groups, topk_group=c.router_group_topk, norm_topk_prob=False)


DSA = ("deepseek_v32", "glm_moe_dsa")


def _indexer(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    glm = w.family == "glm_moe_dsa"
    w.check(c.sparse_attention, "index_topk", f"{w.family} attention is sparse (a lightning indexer)")
    w.check(c.q_lora_rank is not None, "q_lora_rank", f"{w.family} queries always pass through a latent")
    w.need("index_rope_interleave", glm, "the indexer rotates " + ("adjacent pairs" if glm else "halves"))
    if not glm:
        w.need("indexer_types", None, "every layer runs its own indexer")
    out = dict(index_topk=c.index_topk, index_n_heads=c.index_n_heads, index_head_dim=c.index_head_dim)
    if glm:
        out.update(indexer_rope_interleave=True, indexer_types=list(c.indexer_types or ("full",) * c.n_layers))
    return out


WRITERS = {"deepseek_v3": _deepseek_v3, "deepseek_v2": _deepseek_v2, "deepseek_v32": _deepseek_v3,
           "glm_moe_dsa": _deepseek_v3}
