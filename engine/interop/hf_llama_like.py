"""config.json readers of the Llama-like dense families (separate q/k/v/o, gated MLP, RMSNorm or Gemma's
offset norms, RoPE): llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, olmo2, cohere.

Read the way transformers reads them (hf_reader.py); every value we cannot express is a problem naming the HF key.
"""
from __future__ import annotations

from typing import Any

from engine.interop.hf_defaults import GATED_ACTS
from engine.interop.hf_reader import _alias, _decoder, _fixed_head_dim, _layer_windows, _Reader, _same_dropout
from engine.interop.hf_rope import rope_fields


def _llama(r: _Reader) -> dict[str, Any]:
    attn_bias, mlp_bias = r("attention_bias"), r("mlp_bias")
    if attn_bias != mlp_bias:
        r.bad("attention_bias", attn_bias, f"with mlp_bias={mlp_bias}: our `bias` covers attention and MLP alike")
    return dict(_decoder(r), ffn=r.act("hidden_act", GATED_ACTS), bias=bool(attn_bias))


def _mistral(r: _Reader) -> dict[str, Any]:
    return dict(_decoder(r), ffn=r.act("hidden_act", GATED_ACTS), bias=False,
                attn_window=r.nullable("sliding_window"))


def _qwen(r: _Reader) -> dict[str, Any]:
    base = _decoder(r)
    window = r.nullable("sliding_window")
    window = window if r("use_sliding_window") else None   # transformers drops the window unless enabled
    first = r("max_window_layers")
    default = ["sliding_attention" if window is not None and i >= first else "full_attention"
               for i in range(base["n_layers"])]
    base.update(_layer_windows(r, base["n_layers"], window, default), ffn=r.act("hidden_act", GATED_ACTS))
    r.expect("use_mrope", (None, False), "multimodal RoPE sections are not modelled")
    if r.family == "qwen2":
        return dict(base, bias=False, qkv_bias=True)
    r.expect("attention_bias", (False,), "Qwen3 puts it on q, k, v and o but not the MLP")
    return dict(base, bias=False, qk_norm=True)


def _gemma(r: _Reader) -> dict[str, Any]:
    base = _decoder(r, theta_default=1e6 if r.family == "gemma3_text" else 10000.0)
    r.expect("attention_bias", (False,), "Gemma puts it on q, k, v and o but not the MLP")
    r.expect("use_bidirectional_attention", (None, False), "the model is causal")
    base.update(bias=False, embed_scale=True)
    if r.family == "gemma":   # transformers maps the legacy "gelu" of the Gemma releases to the tanh GELU
        ffn = "geglu_tanh" if r("hidden_act") == "gelu" else r.act("hidden_act", GATED_ACTS)
        legacy = r.nullable("hidden_activation")   # read by transformers 4 only; must not disagree
        if legacy is not None and GATED_ACTS.get(legacy) != ffn:
            r.bad("hidden_activation", legacy, f"disagrees with hidden_act={r('hidden_act')!r} ({ffn}), which "
                                               f"transformers 5 uses")
        return dict(base, ffn=ffn)
    hd = base["head_dim"] or base["d_model"] // base["n_heads"]
    scalar = r("query_pre_attn_scalar")
    if not scalar > 0:
        r.bad("query_pre_attn_scalar", scalar, "scores are scaled by its inverse square root")
        scalar = hd
    r.read.add("hidden_act")   # Gemma-2 reads hidden_activation; transformers ignores hidden_act
    n = base["n_layers"]
    every = 2
    if r.family == "gemma3_text":   # local layers: plain RoPE at rope_local_base_freq; QK-norm
        every = _alias(r, "sliding_window_pattern", "_sliding_window_pattern")   # to_dict() writes the latter
        base.setdefault("rope_local_base", float(r("rope_local_base_freq")))
        base["qk_norm"] = True
    default = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n)]
    return dict(base, **_layer_windows(r, n, r.nullable("sliding_window"), default),
                attn_scale=None if scalar == hd else float(scalar) ** -0.5,
                ffn=r.act("hidden_activation", GATED_ACTS), norm_placement="sandwich",
                attn_softcap=r.nullable("attn_logit_softcapping"), logit_softcap=r.nullable("final_logit_softcapping"))


def _phi3(r: _Reader) -> dict[str, Any]:
    base = _decoder(r, partial_ok=True)   # fused qkv_proj and gate_up_proj hold the same matrices as Llama's
    return dict(base, ffn=r.act("hidden_act", GATED_ACTS), bias=False, attn_window=r.nullable("sliding_window"),
                dropout=_same_dropout(r, ("resid_pdrop", "embd_pdrop", "attention_dropout")))


def _olmo2(r: _Reader) -> dict[str, Any]:
    """OLMo-2: Llama sizes; each branch output is normalized before the residual add (no input norms), and
    q and k are RMS-normalized over all heads at once, before the split into heads."""
    r.expect("attention_bias", (False,), "OLMo-2 puts it on q, k, v and o but not the MLP")
    return dict(_decoder(r), ffn=r.act("hidden_act", GATED_ACTS), bias=False, norm_placement="post_branch",
                qk_norm=True, qk_norm_scope="all_heads")


def _cohere(r: _Reader) -> dict[str, Any]:
    """Cohere (Command-R, Aya): a parallel block under one LayerNorm without bias, logits scaled by
    logit_scale; its RoPE pairs dimensions 2i and 2i+1 (the weights are permuted to our halves on import)."""
    d, heads = r("hidden_size"), r("num_attention_heads")
    _fixed_head_dim(r, d, heads)
    kv = r("num_key_value_heads", heads)
    r.expect("use_qk_norm", (None, False), "Cohere's QK-norm is a LayerNorm with weights for every head")
    r.expect("attention_bias", (False,), "Cohere puts it on q, k, v and o but not the MLP")
    r.expect("attention_dropout", (0.0,), "our dropout also acts on the residual stream")
    return dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d,
                n_layers=r("num_hidden_layers"), n_heads=heads, n_kv_heads=None if kv == heads else kv,
                d_ff=r("intermediate_size"), ffn=r.act("hidden_act", GATED_ACTS), norm="layernorm", norm_bias=False,
                norm_eps=float(r("layer_norm_eps")), position="rope", bias=False, block="parallel",
                parallel_shared_norm=True, logit_scale=float(r("logit_scale")),
                tie_embeddings=bool(r("tie_word_embeddings")), **rope_fields(r, d // heads))


READERS = {"llama": _llama, "mistral": _mistral, "qwen2": _qwen, "qwen3": _qwen, "gemma": _gemma, "gemma2": _gemma,
           "gemma3_text": _gemma, "phi3": _phi3, "olmo2": _olmo2, "cohere": _cohere}
