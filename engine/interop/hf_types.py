"""The JSON type of every config.json key the importer reads, checked before any reader uses a value.

A string where a size belongs, a list where a flag belongs or a layer count of -1 or 10^9 is reported naming the HF
key, before a per-layer list is built or arithmetic fails somewhere deeper. null is always allowed here: it means
the transformers default (hf_config.py reads it so).
"""
from __future__ import annotations

import math
from typing import Any

from engine.limits import MAX_INT, MAX_LAYERS

_INT = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers",
        "intermediate_size", "vocab_size", "max_position_embeddings", "n_embd", "n_layer", "n_head", "n_inner",
        "n_positions", "max_window_layers", "sliding_window", "query_pre_attn_scalar", "num_kv_heads",
        "ffn_hidden_size", "n_embed", "num_ln_in_parallel_attn", "d_model", "n_heads", "n_layers", "max_seq_len")
_NUMBER = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "attention_dropout", "resid_pdrop", "embd_pdrop",
           "attn_pdrop", "hidden_dropout", "rope_theta", "rotary_emb_base", "partial_rotary_factor", "rotary_pct",
           "attn_logit_softcapping", "final_logit_softcapping", "swiglu_limit", "swiglu_alpha")
_BOOL = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window", "use_mrope",
         "use_bidirectional_attention", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
         "add_cross_attention", "use_parallel_residual", "alibi", "apply_residual_connection_post_layernorm",
         "new_decoder_architecture", "multi_query", "parallel_attn", "bias")
_STR = ("model_type", "hidden_act", "hidden_activation", "activation_function", "activation", "_name_or_path",
        "rope_type", "type")
KINDS: dict[str, str] = {**{k: "int" for k in _INT}, **{k: "number" for k in _NUMBER},
                         **{k: "bool" for k in _BOOL}, **{k: "str" for k in _STR},
                         "layer_types": "list", "rope_scaling": "dict", "rope_parameters": "dict",
                         "softmax_scale": "number",
                         **{k: "list" for k in ("modules_to_not_convert", "ignore", "llm_int8_skip_modules",
                                                "kda_layers", "full_attn_layers")}}
# mappings whose keys are checked too (a string where a list belongs would be read letter by letter)
_MAPPINGS = ("rope_scaling", "rope_parameters", "quantization_config", "attn_config", "linear_attn_config")
LAYER_KEYS = ("num_hidden_layers", "n_layer")
_WORDS = {"int": "an integer", "number": "a finite number", "bool": "true or false", "str": "a string",
          "list": "a list", "dict": "a JSON object"}


def _fits(kind: str, v: Any) -> bool:
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return isinstance(v, {"bool": bool, "str": str, "list": list, "dict": dict}[kind])


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:37]}..."


def type_problems(d: dict[str, Any]) -> list[str]:
    """One message per config.json key (those of _MAPPINGS' mappings included) whose value has the wrong JSON type
    or size."""
    problems = []
    items = list(d.items())
    for outer in _MAPPINGS:
        if isinstance(d.get(outer), dict):
            items += [(f"{outer}.{k}", v) for k, v in d[outer].items()]
    for key, v in items:
        kind = KINDS.get(key.rpartition(".")[2])
        if v is None or kind is None:
            continue
        if not _fits(kind, v):
            problems.append(f"{key}: {_shown(v)} has the wrong type or value (expected {_WORDS[kind]})")
        elif kind == "int" and abs(v) > MAX_INT:
            problems.append(f"{key}: a {len(str(abs(v))):,}-digit integer is more than {MAX_INT:,}")
        elif key in LAYER_KEYS and v < 1:   # a per-layer list of -1 entries would be refused by another name
            problems.append(f"{key}: {v} is not an integer >= 1 (n_layers)")
        elif key in LAYER_KEYS and v > MAX_LAYERS:
            problems.append(f"{key}: {v:,} layers is more than the engine models (at most {MAX_LAYERS:,})")
        elif kind == "list" and len(v) > MAX_LAYERS:
            problems.append(f"{key}: {len(v):,} entries is more than the engine models (at most {MAX_LAYERS:,})")
    return problems
