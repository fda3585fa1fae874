"""Hugging Face config.json -> ModelConfig, for the families we can express exactly (MoE ones in hf_moe.py;
longer than 300 lines: one short reader per family, side by side).

Read the way transformers reads it: a missing key (or null) means the config class default, so hf_defaults.py
copies those defaults. Every key is either understood, known not to change the forward pass (ids,
bookkeeping, init), or reported: a value we cannot express (a RoPE type we do not model, Falcon-ALiBi, a query scale other than
1/sqrt(head_dim), biases on attention but not the MLP, ...) is a ConfigError naming the HF key, never a silent
approximation. Pure stdlib: importing a config needs no transformers.
"""
from __future__ import annotations

from typing import Any, Callable

from engine.config import ConfigError, ModelConfig
from engine.interop.hf_defaults import DENSE_ACTS, GATED_ACTS
from engine.interop.hf_reader import _decoder, _layer_windows, _Reader
from engine.interop.hf_rope import rope_fields
from engine.interop.hf_types import type_problems

FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "gpt2", "gpt_neox", "falcon",
            "bloom", "stablelm", "starcoder2", "phi3", "gpt_bigcode", "phi", "olmo2", "cohere", "mpt")


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
            r.bad("hidden_activation", legacy, f"disagrees with hidden_act, which transformers 5 uses ({ffn})")
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


def _same_dropout(r: _Reader, keys: tuple[str, ...]) -> float:
    values = [r(k) for k in keys]
    if len(set(values)) > 1:
        r.bad(keys[0], values[0], f"our one dropout needs {' = '.join(keys)}")
    return float(values[0])


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


def _fixed_head_dim(r: _Reader, d: int, heads: int) -> None:
    if "head_dim" in r.d:
        r.expect("head_dim", (None, d // heads), f"{r.family} heads are hidden_size // num_attention_heads")


def _whole_heads(r: _Reader, d: int, heads: int) -> None:
    """Falcon and GPT-NeoX split hidden_size into heads; transformers refuses a remainder."""
    if d % heads:
        r.bad("num_attention_heads", heads, f"{r.family} needs hidden_size ({d}) to be a multiple of it")


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
        r.expect(key, (0, 0.0), "Falcon places dropout differently from our one dropout")
    new, parallel = r("new_decoder_architecture"), r("parallel_attn")
    n_ln = r("num_ln_in_parallel_attn")
    if new:
        kv = r("num_kv_heads", heads)
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


def _alias(r: _Reader, key: str, other: str, other_wins: bool = False) -> Any:
    """A key transformers also accepts under another name. other_wins: an attribute_map alias (BLOOM's
    num_attention_heads for n_head) is set after the named argument, so given both, the alias counts."""
    r.read.update({key, other})
    return r.d[other] if r.d.get(other) is not None and (other_wins or r.d.get(key) is None) else r(key)


def _bloom(r: _Reader) -> dict[str, Any]:
    d = r.d.get("n_embed") or r("hidden_size")   # n_embed: the legacy name transformers still accepts
    r.read.update({"n_embed", "slow_but_exact", "seq_length"})   # slow_but_exact: same sums, another order
    r.expect("apply_residual_connection_post_layernorm", (False,), "the residual is the block input")
    for key in ("hidden_dropout", "attention_dropout"):
        r.expect(key, (0, 0.0), "BLOOM places dropout differently from our one dropout")
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
        r.expect(key, (0, 0.0), "StableLM drops only the MLP output; our one dropout acts everywhere")
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


def _phi3(r: _Reader) -> dict[str, Any]:
    base = _decoder(r, partial_ok=True)   # fused qkv_proj and gate_up_proj hold the same matrices as Llama's
    return dict(base, ffn=r.act("hidden_act", GATED_ACTS), bias=False, attn_window=r.nullable("sliding_window"),
                dropout=_same_dropout(r, ("resid_pdrop", "embd_pdrop", "attention_dropout")))


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
    r.expect("attention_dropout", (0, 0.0), "our dropout also acts on the residual stream")
    return dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d,
                n_layers=r("num_hidden_layers"), n_heads=heads, n_kv_heads=None if kv == heads else kv,
                d_ff=r("intermediate_size"), ffn=r.act("hidden_act", GATED_ACTS), norm="layernorm", norm_bias=False,
                norm_eps=float(r("layer_norm_eps")), position="rope", bias=False, block="parallel",
                parallel_shared_norm=True, logit_scale=float(r("logit_scale")),
                tie_embeddings=bool(r("tie_word_embeddings")), **rope_fields(r, d // heads))


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


_READERS: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "llama": _llama, "mistral": _mistral, "qwen2": _qwen, "qwen3": _qwen, "gemma": _gemma, "gemma2": _gemma,
    "gemma3_text": _gemma,
    "gpt2": _gpt2, "gpt_neox": _gpt_neox, "falcon": _falcon, "bloom": _bloom,
    "stablelm": _stablelm, "starcoder2": _starcoder2, "phi3": _phi3, "phi": _phi, "olmo2": _olmo2, "cohere": _cohere, "mpt": _mpt,
    "gpt_bigcode": _gpt_bigcode}

from engine.interop.hf_moe import READERS as _MOE_READERS  # noqa: E402  (built on the helpers above)

_READERS.update(_MOE_READERS)
FAMILIES += tuple(_MOE_READERS)
from engine.interop.hf_deepseek import READERS as _DEEPSEEK_READERS  # noqa: E402

_READERS.update(_DEEPSEEK_READERS)
FAMILIES += tuple(_DEEPSEEK_READERS)
from engine.interop.hf_dsa import READERS as _DSA_READERS  # noqa: E402

_READERS.update(_DSA_READERS)   # kimi_k2 (a DeepSeek-V3 alias) and deepseek_v4 (refused by field) read too
FAMILIES += ("deepseek_v32", "glm_moe_dsa")
from engine.interop.hf_gpt_oss import READERS as _GPT_OSS_READERS  # noqa: E402

_READERS.update(_GPT_OSS_READERS)
FAMILIES += tuple(_GPT_OSS_READERS)

# Every ModelConfig field a reader does not set takes this value (not ModelConfig's GPT-2 default).
NEUTRAL: dict[str, Any] = dict(
    n_kv_heads=None, head_dim=None, attn_window=None, global_every=None, qk_norm=False, attn_softcap=None,
    qkv_bias=False, rope_base=10000.0, rope_fraction=1.0, ffn_multiple_of=256, norm_bias=None, norm_affine=True,
    embed_norm=False, norm_placement="pre", final_norm=True, block="serial", parallel_shared_norm=False,
    dropout=0.0, embed_scale=False, logit_softcap=None, rope_scaling="none", rope_factor=1.0,
    rope_original_context=None, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0, rope_beta_fast=32.0,
    rope_beta_slow=1.0, rope_truncate=True, rope_attention_factor=None, rope_short_factor=None,
    rope_long_factor=None, layer_types=None, attn_scale=None, rope_local_base=None, nope_layers=None,
    head_bias=False, logit_scale=1.0, mla_norm_eps=None, index_topk=None, indexer_types=None)


def from_hf_config(d: dict[str, Any]) -> ModelConfig:
    """A transformers config.json dict -> ModelConfig computing the same function, or ConfigError."""
    return import_hf_config(d)[0]


def import_hf_config(d: dict[str, Any]) -> tuple[ModelConfig, list[str]]:
    """(config, ignored): the ModelConfig, and one line per key present that transformers does not read for
    this model either (accepted, listed for `import-hf --verbose`), or ConfigError."""
    if not isinstance(d, dict):
        raise ConfigError([f"config.json: expected a JSON object, got {type(d).__name__}"])
    if problems := type_problems(d):
        raise ConfigError(problems)
    family = d.get("model_type")
    if family not in _READERS:
        raise ConfigError([f"model_type: {family!r} is not one of the families we import exactly: "
                           f"{', '.join(FAMILIES)}"])
    r = _Reader(d, family)
    try:
        fields = _READERS[family](r)
    except (TypeError, ValueError, ZeroDivisionError, AttributeError) as e:   # e.g. "hidden_size": "big"
        raise ConfigError([f"config.json: a {family} size or setting has the wrong type or value ({e})"]) from None
    problems = r.problems + r.unknown()
    if problems:
        raise ConfigError(problems)
    name = str(d.get("_name_or_path") or family).rstrip("/").rsplit("/", 1)[-1]
    return ModelConfig.from_dict({**NEUTRAL, **fields, "name": name}), r.ignored
