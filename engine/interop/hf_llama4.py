"""Llama 4 (llama4_text, the language model of llama4): config.json reader, writer and weight pairs, as
transformers 5.24's Llama4Text* classes compute.

  attention  GQA; RoPE on adjacent pairs (complex multiplication; the q and k weights are permuted to our
             rotate-half order), skipped on NoPE layers (no_rope_layers, default every 4th layer); chunked local
             attention (attention_chunk_size) on the layers that rotate, full attention on the NoPE layers
             (layer_types chunked_attention / full_attention); use_qk_norm: an RMS scaling without gain of each
             head's q and k on the rotating layers (our qk_norm_scope rope_heads; a rotation keeps each head's RMS,
             so scaling before RoPE equals Llama 4's scaling after it); attn_temperature_tuning: on NoPE layers q is
             multiplied by 1 + attn_scale*ln(1 + floor((p + 1) / floor_scale)).
  MoE        on layers moe_layers (default every interleave_moe_layer_step-th); the router keeps the top-k logits,
             takes their sigmoid (no renormalisation) and multiplies each chosen expert's INPUT by it
             (router_scales_input); one shared expert of the routed width (intermediate_size); dense layers use
             intermediate_size_mlp.
Experts are stored transposed: gate_up_proj [E, d, 2f] (gate columns first), down_proj [E, f, d].
"""
from __future__ import annotations

from typing import Any

from engine.config import ModelConfig
from engine.interop.hf_defaults import _LLAMA, DEFAULTS, GATED_ACTS
from engine.interop.hf_reader import _decoder, _Reader
from engine.interop.hf_recent import nope_layers
from engine.interop.hf_writer import _GATED, _decoder as _write_decoder, _Writer
from engine.interop.pair import Pair, dense_mlp_pairs, norm_pairs

DEFAULTS["llama4_text"] = dict(
    _LLAMA, vocab_size=202048, hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
    num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
    rms_norm_eps=1e-5, num_experts_per_tok=1, num_local_experts=16, moe_layers=None, interleave_moe_layer_step=1,
    use_qk_norm=True, output_router_logits=False, router_aux_loss_coef=0.001, router_jitter_noise=0.0,
    rope_theta=500000.0, no_rope_layers=None, no_rope_layer_interval=4, attention_chunk_size=8192, layer_types=None,
    attn_temperature_tuning=True, floor_scale=8192, attn_scale=0.1)


def _moe_every(r: _Reader, n: int) -> int | None:
    """moe_layers (0-based) as our moe_every k: the layers k-1, 2k-1, ...; None when no layer is MoE."""
    step = r("interleave_moe_layer_step")
    layers = r.nullable("moe_layers")
    r.read.add("interleave_moe_layer_step")
    if layers is None:
        layers = list(range(step - 1, n, step))
    if not layers:
        return None
    k = layers[0] + 1
    if list(layers) != list(range(k - 1, n, k)):
        r.bad("moe_layers", layers, "MoE layers must be every k-th layer (k, 2k, ... counting from 1)")
    return k


def _llama4_text(r: _Reader) -> dict[str, Any]:
    base = _decoder(r)
    n = base["n_layers"]
    r.expect("attention_bias", (False,), "Llama 4 puts it on q, k, v and o but not the MLP")
    r.expect("router_jitter_noise", (0.0,), "training-time input jitter of the router is not modelled")
    nope = nope_layers(r, n, empty_is_default=True)
    chunk = r.nullable("attention_chunk_size")
    default = ["chunked_attention" if not (nope and i + 1 in nope) and chunk is not None else "full_attention"
               for i in range(n)]
    types = r.nullable("layer_types") or default
    if len(types) != n or set(types) - {"chunked_attention", "full_attention"} or (chunk is None and
                                                                                    "chunked_attention" in types):
        r.bad("layer_types", types, f"{n} entries of chunked_attention / full_attention (chunks need "
                                    f"attention_chunk_size)")
        types = ["full_attention"] * n
    chunked = "chunked_attention" in types
    out = dict(base, d_ff=r("intermediate_size_mlp"), ffn=r.act("hidden_act", GATED_ACTS), bias=False,
               nope_layers=nope, attn_chunk=chunk if chunked else None,
               layer_types=tuple("chunked" if t == "chunked_attention" else "full" for t in types) if chunked else None,
               qk_norm=bool(r("use_qk_norm")), qk_norm_scope="rope_heads")
    r.read.update({"attn_scale", "floor_scale"})
    if r("attn_temperature_tuning") and nope:   # only NoPE layers take it
        out.update(attn_temperature=float(r("attn_scale")), attn_temperature_floor=r("floor_scale"),
                   attn_temperature_one_based=True, attn_temperature_layers="nope")
    every = _moe_every(r, n)
    r.read.add("output_router_logits")
    if every is None:
        r.read.update({"num_local_experts", "num_experts_per_tok", "router_aux_loss_coef"})
        return out
    return dict(out, n_experts=r("num_local_experts"), experts_per_token=r("num_experts_per_tok"),
                expert_d_ff=r("intermediate_size"), n_shared_experts=1, moe_every=every, router="sigmoid",
                router_renorm=False, router_scales_input=True, aux_loss_coef=float(r("router_aux_loss_coef")))


READERS = {"llama4_text": _llama4_text}


def _write_llama4(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    moe = c.n_experts is not None
    w.common("rmsnorm", moe=moe, qk_norm=c.qk_norm, qk_scope="rope_heads", nope=True, chunk=True, temperature=True,
             scales_input=moe)
    w.no_dropout()
    w.need("bias", False)
    w.need("qkv_bias", False)
    w.need("attn_window", None, "Llama 4's local layers are chunked, not sliding")
    w.check(not c.layer_types or "sliding" not in c.layer_types, "layer_types", "no sliding layers")
    chunked = [t == "chunked" for t in (c.layer_types or ["full"] * c.n_layers)]
    nope = set(c.nope_layers or ())
    w.check(all(ch == (i + 1 not in nope) for i, ch in enumerate(chunked)) or not any(chunked), "layer_types",
            "Llama 4 chunks exactly the layers that rotate")
    if c.attn_temperature is not None:
        for field, value in (("attn_temperature_one_based", True), ("attn_temperature_layers", "nope")):
            w.need(field, value, "Llama 4's temperature tuning")
    if moe:
        for field, value in (("router", "sigmoid"), ("router_renorm", False), ("router_scales_input", True),
                             ("n_shared_experts", 1), ("shared_d_ff", None), ("moe_first_dense", None),
                             ("router_selection_bias", False), ("router_groups", 1), ("routed_scale", 1.0),
                             ("expert_bias", False), ("shared_expert_gate", False)):
            w.need(field, value, "Llama 4's MoE")
    n = c.n_layers
    out = dict(_write_decoder(w), intermediate_size_mlp=c.ffn_width, hidden_act=w.act(_GATED), attention_bias=False,
               no_rope_layers=[int(i + 1 not in nope) for i in range(n)], use_qk_norm=c.qk_norm,
               attention_chunk_size=c.attn_chunk if any(chunked) else None,
               layer_types=["chunked_attention" if ch else "full_attention" for ch in chunked],
               attn_temperature_tuning=c.attn_temperature is not None,
               attn_scale=c.attn_temperature if c.attn_temperature is not None else 0.1,
               floor_scale=c.attn_temperature_floor)
    if not moe:
        return dict(out, moe_layers=[])
    return dict(out, intermediate_size=c.expert_width, num_local_experts=c.n_experts,
                num_experts_per_tok=c.experts_per_token, interleave_moe_layer_step=c.moe_every,
                moe_layers=list(range(c.moe_every - 1, n, c.moe_every)), router_aux_loss_coef=c.aux_loss_coef)


WRITERS = {"llama4_text": _write_llama4}


def llama4_pairs(cfg: ModelConfig) -> list[Pair]:
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.norm", ("final_norm",), "copy")]
    for i, moe in enumerate(cfg.moe_layers):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs += [Pair(f"{h}self_attn.{x}_proj", (f"{o}attn.{x}_proj",), f"rope_pairs_{x}") for x in "qk"]
        pairs += [Pair(f"{h}self_attn.{x}_proj", (f"{o}attn.{x}_proj",), "copy") for x in "vo"]
        pairs += norm_pairs(h, o)
        f, e = h + "feed_forward.", o + "ffn."
        if not moe:
            pairs += dense_mlp_pairs(h, o, "feed_forward.")
            continue
        pairs += [Pair(f + "router", (e + "router",), "copy"),
                  Pair(f + "experts.gate_up_proj", (e + "experts.gate", e + "experts.up"), "halves_t", raw=True),
                  Pair(f + "experts.down_proj", (e + "experts.down",), "experts_t", raw=True)]
        pairs += [Pair(f"{f}shared_expert.{x}_proj", (f"{e}shared.{x}",), "copy") for x in ("gate", "up", "down")]
    return pairs
