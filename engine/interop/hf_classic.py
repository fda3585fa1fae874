"""config.json readers of the families with their own key names and fused or Conv1D layers: gpt2,
gpt_bigcode, gpt_neox, falcon, bloom, stablelm, starcoder2, phi, mpt.

Read the way transformers reads them (hf_reader.py); every value we cannot express is a problem naming the HF key.
"""
from __future__ import annotations

from typing import Any

from engine.interop.hf_defaults import DENSE_ACTS, GATED_ACTS
from engine.interop.hf_reader import _alias, _fixed_head_dim, _Reader, _same_dropout, _whole_heads
from engine.interop.hf_rope import rope_fields


def _gpt2(r: _Reader) -> dict[str, Any]:
    d = r("n_embd")
    r.expect("scale_attn_weights", (True,), "scores are always scaled by 1/sqrt(head_dim)")
    r.expect("scale_attn_by_inverse_layer_idx", (False,), "no per-layer score scaling")
    r.expect("add_cross_attention", (False,), "decoder-only")
    return dict(vocab_size=r("vocab_size"), context_length=r("n_positions"), d_model=d, n_layers=r("n_layer"),
                n_heads=r("n_head"), d_ff=r("n_inner", 4 * d), ffn=r.act("activation_function", DENSE_ACTS),
                norm="layernorm", norm_eps=float(r("layer_norm_epsilon")), position="learned", bias=True,
                dropout=_same_dropout(r, ("resid_pdrop", "embd_pdrop", "attn_pdrop")),
                tie_embeddings=bool(r("tie_word_embeddings")))


def _gpt_bigcode(r: _Reader) -> dict[str, Any]:
    """GPT-2 with nn.Linear layers and, usually, one key/value head (multi_query)."""
    base = _gpt2(r)
    r.read.update({"attention_softmax_in_fp32", "scale_attention_softmax_in_fp32",   # precision switches
                   "num_key_value_heads"})   # derived from multi_query by the config class
    return dict(base, n_kv_heads=1 if r("multi_query") else None)


def _gpt_neox(r: _Reader) -> dict[str, Any]:
    d, heads = r("hidden_size"), r("num_attention_heads")
    _fixed_head_dim(r, d, heads)
    _whole_heads(r, d, heads)
    r.expect("attention_bias", (True,), "the NeoX MLP always has biases; our `bias` covers both")
    if "rope_theta" in r.d:   # transformers 4 also wrote its copy of rotary_emb_base; 5 reads only the latter
        r.ignore("rope_theta", "GPT-NeoX reads rotary_emb_base")
    return dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d,
                n_layers=r("num_hidden_layers"), n_heads=heads, d_ff=r("intermediate_size"),
                ffn=r.act("hidden_act", DENSE_ACTS), norm="layernorm", norm_eps=float(r("layer_norm_eps")),
                position="rope", bias=True, block="parallel" if r("use_parallel_residual") else "serial",
                dropout=_same_dropout(r, ("hidden_dropout", "attention_dropout")),
                tie_embeddings=bool(r("tie_word_embeddings")),
                **rope_fields(r, d // heads, theta_keys=("rotary_emb_base",), fraction_keys=("rotary_pct",),
                        fraction_default=0.25, partial_ok=True))


def _falcon(r: _Reader) -> dict[str, Any]:
    d = r("n_embed") or r("hidden_size")   # n_embed: the legacy name transformers still accepts
    heads = r("num_attention_heads")
    _fixed_head_dim(r, d, heads)
    _whole_heads(r, d, heads)
    r.expect("alibi", (False,), "ALiBi position biases are not modelled; we use RoPE")
    r.expect("apply_residual_connection_post_layernorm", (False,), "the residual is the block input")
    for key in ("hidden_dropout", "attention_dropout"):
        r.expect(key, (0.0,), "Falcon places dropout differently from our one dropout")
    new, parallel = r("new_decoder_architecture"), r("parallel_attn")
    n_ln = r("num_ln_in_parallel_attn")
    if new:
        kv = r("num_kv_heads")   # missing: one per query head, which n_kv_heads None below says
        r.read.add("multi_query")
        if not parallel:
            r.bad("parallel_attn", parallel, "new_decoder_architecture blocks are parallel")
        shared = (n_ln or 2) == 1
    else:
        kv = 1 if r("multi_query") else heads
        r.read.add("num_kv_heads")
        if parallel and n_ln not in (None, 1):
            r.bad("num_ln_in_parallel_attn", n_ln, "the classic parallel block has one shared norm")
        shared = True
    return dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d,
                n_layers=r("num_hidden_layers"), n_heads=heads, n_kv_heads=None if kv == heads else kv,
                d_ff=r("ffn_hidden_size", 4 * d), ffn=r.act("activation", DENSE_ACTS), norm="layernorm",
                norm_eps=float(r("layer_norm_epsilon")), position="rope", bias=bool(r("bias")),
                block="parallel" if parallel else "serial", parallel_shared_norm=bool(parallel and shared),
                tie_embeddings=bool(r("tie_word_embeddings")), **rope_fields(r, d // heads))


def _bloom(r: _Reader) -> dict[str, Any]:
    d = r.d.get("n_embed") or r("hidden_size")   # n_embed: the legacy name transformers still accepts
    r.read.update({"n_embed", "slow_but_exact", "seq_length"})   # slow_but_exact: same sums, another order
    r.expect("apply_residual_connection_post_layernorm", (False,), "the residual is the block input")
    for key in ("hidden_dropout", "attention_dropout"):
        r.expect(key, (0.0,), "BLOOM places dropout differently from our one dropout")
    return dict(vocab_size=r("vocab_size"), context_length=int(r.d.get("seq_length") or 2048), d_model=d,
                n_layers=_alias(r, "n_layer", "num_hidden_layers", other_wins=True),
                n_heads=_alias(r, "n_head", "num_attention_heads", other_wins=True),
                d_ff=4 * d, ffn="gelu_tanh", norm="layernorm", norm_eps=float(r("layer_norm_epsilon")),
                position="alibi", bias=True, embed_norm=True, tie_embeddings=bool(r("tie_word_embeddings")))


def _stablelm(r: _Reader) -> dict[str, Any]:
    d, heads = r("hidden_size"), r("num_attention_heads")
    _fixed_head_dim(r, d, heads)
    kv = r("num_key_value_heads", heads)
    r.expect("qk_layernorm", (False,), "StableLM's QK-norm has separate weights for every head")
    for key in ("hidden_dropout", "attention_dropout"):
        r.expect(key, (0.0,), "StableLM drops only the MLP output; our one dropout acts everywhere")
    parallel = bool(r("use_parallel_residual"))
    return dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d,
                n_layers=r("num_hidden_layers"), n_heads=heads, n_kv_heads=None if kv == heads else kv,
                d_ff=r("intermediate_size"), ffn=r.act("hidden_act", GATED_ACTS), norm="layernorm",
                norm_eps=float(r("layer_norm_eps")), position="rope", bias=False, qkv_bias=bool(r("use_qkv_bias")),
                block="parallel" if parallel else "serial", parallel_shared_norm=parallel,
                tie_embeddings=bool(r("tie_word_embeddings")),
                **rope_fields(r, d // heads, fraction_default=0.25, partial_ok=True))


def _starcoder2(r: _Reader) -> dict[str, Any]:
    d, heads = r("hidden_size"), r("num_attention_heads")
    _fixed_head_dim(r, d, heads)
    kv = r("num_key_value_heads", heads)
    return dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d,
                n_layers=r("num_hidden_layers"), n_heads=heads, n_kv_heads=None if kv == heads else kv,
                d_ff=r("intermediate_size"), ffn=r.act("hidden_act", DENSE_ACTS), norm="layernorm",
                norm_eps=float(r("norm_epsilon")), position="rope", bias=bool(r("use_bias")),
                attn_window=r.nullable("sliding_window"), tie_embeddings=bool(r("tie_word_embeddings")),
                dropout=_same_dropout(r, ("residual_dropout", "embedding_dropout", "attention_dropout")),
                **rope_fields(r, d // heads))


def _phi(r: _Reader) -> dict[str, Any]:
    """Phi-1/1.5/2: a parallel block under one LayerNorm, biases everywhere including the output head, rotary on
    half of each head by default."""
    d, heads = r("hidden_size"), r("num_attention_heads")
    _fixed_head_dim(r, d, heads)
    kv = r("num_key_value_heads", heads)
    r.expect("qk_layernorm", (False,), "Phi's QK-norm is a LayerNorm with a bias per head dimension")
    return dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d,
                n_layers=r("num_hidden_layers"), n_heads=heads, n_kv_heads=None if kv == heads else kv,
                d_ff=r("intermediate_size"), ffn=r.act("hidden_act", DENSE_ACTS), norm="layernorm",
                norm_eps=float(r("layer_norm_eps")), position="rope", bias=True, block="parallel",
                parallel_shared_norm=True, head_bias=True, tie_embeddings=bool(r("tie_word_embeddings")),
                dropout=_same_dropout(r, ("resid_pdrop", "embd_pdrop", "attention_dropout")),
                **rope_fields(r, d // heads, fraction_default=0.5, partial_ok=True))


_MPT_UNREAD = ("expansion_ratio", "no_bias", "learned_pos_emb", "logit_scale", "embedding_fraction", "norm_type",
               "resid_pdrop", "emb_pdrop", "init_device", "init_config", "verbose", "tokenizer_name")


def _mpt(r: _Reader) -> dict[str, Any]:
    """MPT as transformers builds it: ALiBi with slopes 2^(-8h/n), fused Wqkv [q | k | v], no linear biases,
    LayerNorms without bias, a 4x exact-GELU MLP; transformers' MPT reads only a few keys of attn_config."""
    d, heads = r("d_model"), r("n_heads")
    if heads & (heads - 1):
        r.bad("n_heads", heads, "MPT orders the ALiBi slopes of non-power-of-two head counts unlike BLOOM; "
                                "only powers of two are modelled")
    attn = r.d.get("attn_config") or {}
    r.read.add("attn_config")
    if not isinstance(attn, dict):
        r.bad("attn_config", attn, "expected a mapping")
        attn = {}
    if attn.get("clip_qkv") is not None:
        r.bad("attn_config.clip_qkv", attn["clip_qkv"], "clamping q, k, v is not modelled")
    scale = attn.get("softmax_scale")
    for key in _MPT_UNREAD:
        if key in r.d:
            r.ignore(key, "transformers' MPT does not read it")
    return dict(vocab_size=r("vocab_size"), context_length=r("max_seq_len"), d_model=d, n_layers=r("n_layers"),
                n_heads=heads, d_ff=4 * d, ffn="gelu", norm="layernorm", norm_bias=False,
                norm_eps=float(r("layer_norm_epsilon")), position="alibi", bias=False,
                attn_scale=None if scale is None or scale == (d // heads) ** -0.5 else float(scale),
                dropout=float(attn.get("attn_pdrop") or 0.0), tie_embeddings=bool(r("tie_word_embeddings")))


READERS = {"gpt2": _gpt2, "gpt_neox": _gpt_neox, "falcon": _falcon, "bloom": _bloom, "stablelm": _stablelm,
           "starcoder2": _starcoder2, "gpt_bigcode": _gpt_bigcode, "phi": _phi, "mpt": _mpt}
