"""ModelConfig -> Hugging Face (model_type, config dict), for configs some supported family can express.

Each family writer lists what it cannot express (one problem per field, e.g. `norm_placement: 'post'`); the
first family without problems wins, in the order of _WRITERS. When none fits, the error shows the closest
family's problems, so the user sees which of their choices no real model family has.
"""
from __future__ import annotations

from typing import Any, Callable

from engine.config import ConfigError, ModelConfig
from engine.interop.hf_writer import _DENSE, _GATED, _decoder, _Writer
from engine.validation import choice_problem

_GPT2_DENSE = dict(_DENSE, gelu_tanh="gelu_new")   # GPT-2's own name for the same tanh approximation


def _layer_types(cfg: ModelConfig) -> list[str]:
    return ["full_attention" if w is None else "sliding_attention" for w in cfg.layer_windows]


def _llama(w: _Writer) -> dict[str, Any]:
    w.common("rmsnorm")
    w.no_window()
    w.no_dropout()
    w.check(w.cfg.bias or not w.cfg.qkv_bias, "qkv_bias", "biases on q, k, v only are Qwen2's")
    return dict(_decoder(w), hidden_act=w.act(_GATED), attention_bias=w.cfg.bias, mlp_bias=w.cfg.bias)


def _mistral(w: _Writer) -> dict[str, Any]:
    w.common("rmsnorm")
    w.no_dropout()
    w.need("bias", False)
    w.need("qkv_bias", False)
    w.check(w.cfg.global_every is None or w.cfg.global_every > w.cfg.n_layers, "global_every",
            "the window applies to every layer")
    w.check(w.cfg.layer_types is None or set(w.cfg.layer_types) == {"sliding"}, "layer_types",
            "the window applies to every layer")
    return dict(_decoder(w), hidden_act=w.act(_GATED), sliding_window=w.cfg.attn_window)


def _qwen(w: _Writer) -> dict[str, Any]:
    qwen3 = w.family == "qwen3"
    w.common("rmsnorm", qk_norm=qwen3)
    w.no_dropout()
    w.need("bias", False)
    w.need("qkv_bias", not qwen3, "Qwen2 always has q, k, v biases; Qwen3 has none")
    c = w.cfg
    return dict(_decoder(w), hidden_act=w.act(_GATED), use_sliding_window=c.attn_window is not None,
                sliding_window=c.attn_window, max_window_layers=0, layer_types=_layer_types(c))


def _gemma(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    gemma2 = w.family == "gemma2"
    w.common("rmsnorm", "sandwich" if gemma2 else "pre", embed_scale=True, softcaps=gemma2)
    w.no_dropout()
    w.need("bias", False)
    w.need("qkv_bias", False)
    if not gemma2:
        w.no_window()
        w.check(c.ffn != "geglu", "ffn", "transformers reads Gemma's hidden_act gelu as the tanh GELU (geglu_tanh)")
        return dict(_decoder(w), hidden_act=w.act(_GATED), attention_bias=False)
    scalar = c.head_width if c.attn_scale is None else round(c.attn_scale ** -2)   # an integer in transformers
    w.check(c.attn_scale in (None, float(scalar) ** -0.5), "attn_scale",
            "query_pre_attn_scalar is a whole number: attn_scale must be 1/sqrt(n)")
    return dict(_decoder(w), hidden_activation=w.act(_GATED), attention_bias=False,
                query_pre_attn_scalar=scalar, sliding_window=c.attn_window, layer_types=_layer_types(c),
                attn_logit_softcapping=c.attn_softcap, final_logit_softcapping=c.logit_softcap)


def _gpt2(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("layernorm")
    w.need("position", "learned")
    w.need("block", "serial")
    w.need("bias", True)
    w.no_window()
    w.mha_only()
    return dict(vocab_size=c.vocab_size, n_positions=c.context_length, n_embd=c.d_model, n_layer=c.n_layers,
                n_head=c.n_heads, n_inner=c.ffn_width, activation_function=w.act(_GPT2_DENSE),
                layer_norm_epsilon=c.norm_eps, resid_pdrop=c.dropout, embd_pdrop=c.dropout, attn_pdrop=c.dropout,
                tie_word_embeddings=c.tie_embeddings)


def _gpt_neox(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("layernorm")
    w.need("bias", True, "the NeoX MLP always has biases")
    w.no_window()
    w.mha_only()
    w.check(c.block == "serial" or not c.parallel_shared_norm, "parallel_shared_norm", "NeoX has two norms")
    return dict(vocab_size=c.vocab_size, hidden_size=c.d_model, num_hidden_layers=c.n_layers,
                num_attention_heads=c.n_heads, intermediate_size=c.ffn_width, hidden_act=w.act(_DENSE),
                layer_norm_eps=c.norm_eps, use_parallel_residual=c.block == "parallel", attention_bias=True,
                hidden_dropout=c.dropout, attention_dropout=c.dropout, tie_word_embeddings=c.tie_embeddings,
                **w.rope(partial=True))


def _falcon(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("layernorm")
    w.no_window()
    w.no_dropout()
    w.check(c.bias or not c.qkv_bias, "qkv_bias", "Falcon's `bias` covers every linear layer")
    w.check(c.attn_width == c.d_model, "head_dim", "heads * head_dim must equal d_model")
    classic = c.kv_heads in (1, c.n_heads) and (c.block == "serial" or c.parallel_shared_norm)
    w.check(classic or c.block == "parallel", "n_kv_heads", "a serial Falcon block has MHA or MQA only")
    out = dict(vocab_size=c.vocab_size, hidden_size=c.d_model, num_hidden_layers=c.n_layers,
               num_attention_heads=c.n_heads, ffn_hidden_size=c.ffn_width, activation=w.act(_DENSE),
               layer_norm_epsilon=c.norm_eps, bias=c.bias, parallel_attn=c.block == "parallel", alibi=False,
               tie_word_embeddings=c.tie_embeddings, **w.rope())
    if classic:
        return dict(out, new_decoder_architecture=False, multi_query=c.kv_heads == 1, num_kv_heads=c.kv_heads)
    return dict(out, new_decoder_architecture=True, multi_query=False, num_kv_heads=c.kv_heads,
                num_ln_in_parallel_attn=1 if c.parallel_shared_norm else 2)


_WRITERS: dict[str, Callable[[_Writer], dict[str, Any]]] = {
    "llama": _llama, "mistral": _mistral, "qwen2": _qwen, "qwen3": _qwen, "gemma": _gemma, "gemma2": _gemma,
    "gpt2": _gpt2, "gpt_neox": _gpt_neox, "falcon": _falcon}


from engine.interop.hf_moe_export import WRITERS as _MOE_WRITERS  # noqa: E402  (built on _Writer above)

_WRITERS.update(_MOE_WRITERS)
from engine.interop.hf_deepseek_export import WRITERS as _DEEPSEEK_WRITERS  # noqa: E402

_WRITERS.update(_DEEPSEEK_WRITERS)
from engine.interop.hf_gpt_oss import WRITERS as _GPT_OSS_WRITERS  # noqa: E402

_WRITERS.update(_GPT_OSS_WRITERS)
from engine.interop.hf_qwen_hybrid import WRITERS as _QWEN_HYBRID_WRITERS  # noqa: E402

_WRITERS.update(_QWEN_HYBRID_WRITERS)
from engine.interop.hf_recent_export import WRITERS as _RECENT_WRITERS  # noqa: E402

_WRITERS.update(_RECENT_WRITERS)
from engine.interop.hf_llama4 import WRITERS as _LLAMA4_WRITERS  # noqa: E402

_WRITERS.update(_LLAMA4_WRITERS)
from engine.interop.hf_ssm_export import WRITERS as _SSM_WRITERS  # noqa: E402

_WRITERS.update(_SSM_WRITERS)
from engine.interop.hf_kimi import WRITERS as _KIMI_WRITERS  # noqa: E402
from engine.interop.hf_minimax import WRITERS as _MINIMAX_WRITERS  # noqa: E402

_WRITERS.update(_KIMI_WRITERS, **_MINIMAX_WRITERS)


def hf_problems(cfg: ModelConfig, model_type: str) -> tuple[dict[str, Any], list[str]]:
    """The family's config dict for `cfg` and what it cannot express (empty when it is exact)."""
    w = _Writer(cfg, model_type)
    return _WRITERS[model_type](w), w.problems


def to_hf_config(cfg: ModelConfig, model_type: str | None = None) -> tuple[str, dict[str, Any]]:
    """(model_type, config kwargs) of a transformers model computing what `cfg` computes, or ConfigError
    naming each feature the family (given, or the closest supported one) cannot express."""
    if model_type is not None and model_type not in _WRITERS:
        raise ConfigError([choice_problem("model_type", model_type, _WRITERS)])
    tried = {f: hf_problems(cfg, f) for f in ([model_type] if model_type else _WRITERS)}
    for family, (out, problems) in tried.items():
        if not problems:
            return family, out
    family = min(tried, key=lambda f: len(tried[f][1]))
    lead = f"{cfg.name}: no Hugging Face family we support computes this model; closest is {family}:"
    raise ConfigError([lead] + tried[family][1])
