"""ModelConfig -> config.json of a mixture-of-experts family (mixtral, qwen2_moe, qwen3_moe, olmoe); the
inverse of hf_moe.py's readers. Anything the family's router or layer pattern cannot express is a problem."""
from __future__ import annotations

from typing import Any

from engine.interop.hf_writer import _GATED, _decoder, _Writer


def _routing(w: _Writer, renorm: bool | None, partial: bool = False) -> dict[str, Any]:
    """Softmax-then-top-k routing without DeepSeek's or gpt-oss's extras; renorm fixed (Mixtral) or free;
    partial: the family rotates part of each head."""
    c = w.cfg
    w.check(c.n_experts is not None, "n_experts", f"{w.family} is a mixture of experts")
    w.need("router", "softmax_topk", "softmax over all experts, then top-k")
    if renorm is not None:
        w.need("router_renorm", renorm)
    for field, plain in (("router_selection_bias", False), ("router_groups", 1), ("routed_scale", 1.0),
                         ("expert_bias", False)):
        w.need(field, plain)
    w.no_dropout()
    return dict(_decoder(w, partial), hidden_act=w.act(_GATED), num_experts_per_tok=c.experts_per_token,
                router_aux_loss_coef=c.aux_loss_coef, norm_topk_prob=c.router_renorm)


def _all_layers_moe(w: _Writer) -> None:
    w.need("moe_first_dense", None, "every layer is MoE")
    w.need("moe_every", 1, "every layer is MoE")


def _no_shared(w: _Writer) -> None:
    w.need("n_shared_experts", None, "no shared experts")


def _mixtral(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", moe=True)
    w.need("bias", False)
    w.need("qkv_bias", False)
    _all_layers_moe(w)
    _no_shared(w)
    w.check(c.expert_width == c.ffn_width, "expert_d_ff", "experts use intermediate_size")
    w.check(c.global_every is None or c.global_every > c.n_layers, "global_every", "the window applies to every layer")
    w.check(c.layer_types is None or set(c.layer_types) == {"sliding"}, "layer_types", "the window applies to every layer")
    out = _routing(w, True)
    del out["norm_topk_prob"]
    return dict(out, num_local_experts=c.n_experts, sliding_window=c.attn_window)


def _qwen_moe(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    qwen3 = w.family == "qwen3_moe"
    w.common("rmsnorm", qk_norm=qwen3, moe=True)
    w.need("bias", False)
    w.need("attn_window", None, "sliding windows are not modelled for Qwen MoE")
    out = dict(_routing(w, None), num_experts=c.n_experts, moe_intermediate_size=c.expert_width,
               decoder_sparse_step=c.moe_every, mlp_only_layers=list(range(c.moe_first_dense or 0)),
               use_sliding_window=False)
    if qwen3:
        w.need("qkv_bias", False)
        _no_shared(w)
        return dict(out, attention_bias=False)
    w.need("n_shared_experts", 1, "Qwen2-MoE has one shared expert")
    w.need("shared_expert_gate", True, "Qwen2-MoE gates its shared expert")
    return dict(out, qkv_bias=c.qkv_bias, shared_expert_intermediate_size=c.shared_width)


def _olmoe(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", qk_norm=True, moe=True, qk_scope="all_heads")
    w.need("qkv_bias", False, "OLMoE's attention_bias covers q, k, v and o alike")
    w.no_window()
    w.check(c.attn_width == c.d_model, "head_dim", "heads * head_dim must equal d_model")
    w.check(c.expert_width == c.ffn_width, "expert_d_ff", "experts use intermediate_size")
    _all_layers_moe(w)
    _no_shared(w)
    out = _routing(w, None)
    del out["head_dim"]
    return dict(out, num_experts=c.n_experts, attention_bias=c.bias, clip_qkv=None)   # intermediate_size: the experts'


WRITERS = {"mixtral": _mixtral, "qwen2_moe": _qwen_moe, "qwen3_moe": _qwen_moe, "olmoe": _olmoe}
