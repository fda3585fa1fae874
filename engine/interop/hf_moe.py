"""Mixture-of-experts families (mixtral, qwen2_moe, qwen3_moe, olmoe): config.json readers and weight pairs.

Registered into hf_config's readers and weights' pairs; written back by hf_moe_export.py. Routing per family,
as transformers 5 computes it: softmax over all experts, top-k, renormalised always (Mixtral) or when
norm_topk_prob (Qwen, OLMoE). Qwen2-MoE adds one shared expert behind a sigmoid gate; a layer is MoE when
(i+1) % decoder_sparse_step == 0 and i is not in mlp_only_layers (which must be the first layers, our
moe_first_dense). OLMoE normalises q and k over all heads at once (qk_norm_scope: all_heads).
Experts are stored as stacked tensors: gate_up_proj [E, 2f, d] (gate rows first), down_proj [E, d, f].
"""
from __future__ import annotations

from typing import Any

from engine.config import ModelConfig
from engine.interop.hf_reader import _decoder, _Reader
from engine.interop.hf_defaults import GATED_ACTS
from engine.interop.pair import Pair, dense_mlp_pairs, norm_pairs, stacked_expert_pairs


def _experts(r: _Reader, experts_key: str, width_key: str, renorm: bool | None) -> dict[str, Any]:
    r.read.add("output_router_logits")   # whether transformers returns router logits: bookkeeping
    return dict(n_experts=r(experts_key), experts_per_token=r("num_experts_per_tok"), expert_d_ff=r(width_key),
                router="softmax_topk", router_renorm=bool(r("norm_topk_prob")) if renorm is None else renorm,
                aux_loss_coef=float(r("router_aux_loss_coef")), ffn=r.act("hidden_act", GATED_ACTS), bias=False)


def _sparse_layers(r: _Reader, n_layers: int) -> dict[str, Any]:
    """decoder_sparse_step + mlp_only_layers as moe_every + moe_first_dense."""
    step, dense = r("decoder_sparse_step"), sorted(r("mlp_only_layers"))
    if dense != list(range(len(dense))):
        r.bad("mlp_only_layers", dense, "dense layers must be the first ones (moe_first_dense)")
    if len(dense) >= n_layers:
        r.bad("mlp_only_layers", dense, "leaves no MoE layer")
    return dict(moe_every=step, moe_first_dense=len(dense) or None)


def _no_window(r: _Reader) -> None:
    if r("use_sliding_window"):
        r.bad("use_sliding_window", True, f"{r.family} sliding windows are not modelled")
    r.read.update({"sliding_window", "max_window_layers", "layer_types"})


def _mixtral(r: _Reader) -> dict[str, Any]:
    r.expect("router_jitter_noise", (0.0,), "training-time input jitter of the router is not modelled")
    return dict(_decoder(r), **_experts(r, "num_local_experts", "intermediate_size", True),
                attn_window=r.nullable("sliding_window"))


def _qwen_moe(r: _Reader) -> dict[str, Any]:
    base = _decoder(r)
    _no_window(r)
    # Qwen3-MoE's config maps num_experts onto num_local_experts (which wins when both are given); Qwen2-MoE
    # reads num_experts only, so there num_local_experts is an unknown key
    qwen3 = r.family == "qwen3_moe"
    key = "num_local_experts" if qwen3 and "num_local_experts" in r.d else "num_experts"
    r.read.add("num_experts")
    out = dict(base, **_experts(r, key, "moe_intermediate_size", None), **_sparse_layers(r, base["n_layers"]))
    if qwen3:
        r.expect("attention_bias", (False,), "Qwen3-MoE puts it on q, k, v and o but not the MLP")
        return dict(out, qk_norm=True)
    shared = r("shared_expert_intermediate_size")
    return dict(out, qkv_bias=bool(r("qkv_bias")), n_shared_experts=1 if shared else None,
                shared_d_ff=shared or None, shared_expert_gate=bool(shared))


def _olmoe(r: _Reader) -> dict[str, Any]:
    base = _decoder(r)
    if base["head_dim"] is not None:   # _decoder keeps head_dim only when it differs from d // heads
        r.bad("head_dim", base["head_dim"], "OLMoE heads are hidden_size // num_attention_heads")
    r.expect("clip_qkv", (None,), "clamping q, k, v is not modelled")
    # every OLMoE layer is MoE, so `bias` (attention and dense FFNs) reaches exactly the attention biases
    return {**base, **_experts(r, "num_experts", "intermediate_size", None), "qk_norm": True,
            "qk_norm_scope": "all_heads", "bias": bool(r("attention_bias"))}


READERS = {"mixtral": _mixtral, "qwen2_moe": _qwen_moe, "qwen3_moe": _qwen_moe, "olmoe": _olmoe}


def moe_pairs(cfg: ModelConfig, family: str) -> list[Pair]:
    """Module pairs of a llama-like MoE family; raw (suffix-less) tensors for the stacked experts."""
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.norm", ("final_norm",), "copy")]
    for i, moe in enumerate(cfg.moe_layers):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs += [Pair(f"{h}self_attn.{x}_proj", (f"{o}attn.{x}_proj",), "copy") for x in "qkvo"]
        pairs += [Pair(f"{h}self_attn.{x}_norm", (f"{o}attn.{x}_norm",), "copy") for x in "qk" if cfg.qk_norm]
        pairs += norm_pairs(h, o)
        pairs += moe_ffn_pairs(cfg, h, o, moe)
    return pairs


def moe_ffn_pairs(cfg: ModelConfig, h: str, o: str, moe: bool) -> list[Pair]:
    """One layer's FFN (HF prefix h, ours o): a gated MLP, or the router, stacked experts and shared expert."""
    if not moe:
        return dense_mlp_pairs(h, o)
    pairs = [Pair(h + "mlp.gate", (o + "ffn.router",), "copy"), *stacked_expert_pairs(h, o)]
    if cfg.n_shared_experts:
        pairs += [Pair(f"{h}mlp.shared_expert.{x}_proj", (f"{o}ffn.shared.{x}",), "copy")
                  for x in ("gate", "up", "down")]
    if cfg.shared_expert_gate:
        pairs.append(Pair(h + "mlp.shared_expert_gate", (o + "ffn.shared_gate",), "copy"))
    return pairs
