"""ModelConfig's problems with an imported config, restated at the config.json key that set the field.

The user wrote the file's keys, not our fields: `n_layers: -1 is not an integer >= 1` reads as
`num_hidden_layers: -1 is not an integer >= 1 (n_layers)`. A field is traced to a key only when exactly one of
the keys that set it (field_keys, across the families) is in the file with the field's very value; a value
computed from keys (GPT-2's d_ff = 4 * n_embd), or one two keys hold, is reported against the whole file, never
at a key that may not have set it.
"""
from __future__ import annotations

from typing import Any

from engine.config import FIELDS


def _rope(name: str) -> tuple[str, ...]:
    """A RoPE parameter's paths: in rope_scaling, rope_parameters or rope_parameters' full-attention mapping."""
    return tuple(f"{m}.{name}" for m in ("rope_scaling", "rope_parameters", "rope_parameters.full_attention"))


def _linear(key: str, nested: str) -> tuple[str, ...]:
    """A linear-attention size: Qwen3-Next's and MiniMax's flat key, Kimi Linear's in linear_attn_config."""
    return key, f"linear_attn_config.{nested}"


# the keys (paths) whose value the readers copy into each field, besides ROPE_PARAMS' and LINEAR_KEYS' below; a
# field none of them names is never traced to a key
FIELD_KEYS: dict[str, tuple[str, ...]] = {
    "vocab_size": ("vocab_size",),
    "context_length": ("max_position_embeddings", "n_positions", "max_seq_len", "model_max_length", "seq_length"),
    "d_model": ("hidden_size", "n_embd", "n_embed", "d_model"),
    "n_layers": ("num_hidden_layers", "n_layer", "n_layers"),
    "n_heads": ("num_attention_heads", "n_head", "n_heads"),
    "n_kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim",),
    "attn_window": ("sliding_window",),
    "attn_chunk": ("attention_chunk_size",),
    "attn_scale": ("attention_multiplier",),
    "attn_softcap": ("attn_logit_softcapping",),
    "attn_temperature": ("attn_scale",),
    "attn_temperature_floor": ("floor_scale",),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "index_topk": ("index_topk",),
    "index_n_heads": ("index_n_heads",),
    "index_head_dim": ("index_head_dim",),
    "gdn_k_heads": ("linear_num_key_heads",),
    "gdn_v_heads": ("linear_num_value_heads",),
    "gdn_k_dim": ("linear_key_head_dim",),
    "gdn_v_dim": ("linear_value_head_dim",),
    "gdn_chunk": ("block_size",),
    "ssm_state": ("mamba_d_state", "ssm_state_size"),
    "ssm_conv_kernel": ("mamba_d_conv", "conv_kernel"),
    "ssm_chunk": ("mamba_chunk_size", "chunk_size"),
    "ssm_heads": ("mamba_n_heads", "mamba_num_heads"),
    "ssm_head_dim": ("mamba_d_head", "mamba_head_dim"),
    "ssm_groups": ("mamba_n_groups", "n_groups"),
    "ssm_dt_min": ("time_step_min",),
    "ssm_dt_rank": ("mamba_dt_rank",),
    "ssm_in_scale": ("ssm_in_multiplier",),
    "ssm_out_scale": ("ssm_out_multiplier", "residual_multiplier"),
    "rope_base": ("rope_theta", "rotary_emb_base"),
    "rope_local_base": ("rope_local_base_freq", "rope_parameters.sliding_attention.rope_theta",
                        "rope_theta"),   # OLMo-3's sliding layers rotate at rope_theta
    "rope_original_context": ("original_max_position_embeddings",),
    "d_ff": ("intermediate_size", "n_inner", "ffn_hidden_size", "intermediate_size_mlp", "shared_intermediate_size"),
    "swiglu_limit": ("swiglu_limit",),
    "swiglu_alpha": ("swiglu_alpha",),
    "ffn_out_scale": ("residual_multiplier",),
    "n_experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "experts_per_token": ("num_experts_per_tok", "num_experts_per_token", "moe_k"),
    "expert_d_ff": ("moe_intermediate_size", "intermediate_size"),
    "n_shared_experts": ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts"),
    "shared_d_ff": ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
                    "shared_intermediate_size"),
    "moe_first_dense": ("first_k_dense_replace", "moe_layer_start_index"),
    "moe_every": ("decoder_sparse_step", "moe_layer_interval"),
    "router_groups": ("n_group", "num_expert_group"),
    "router_group_topk": ("topk_group",),
    "routed_scale": ("routed_scaling_factor",),
    "aux_loss_coef": ("router_aux_loss_coef",),
    "norm_eps": ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"),
    "dropout": ("attention_dropout", "resid_pdrop", "hidden_dropout", "attn_config.attn_pdrop"),
    "attn_out_scale": ("residual_multiplier",),
    "embed_multiplier": ("embedding_multiplier",),
    "logit_softcap": ("final_logit_softcapping",),
    "logit_scale": ("logit_scale", "logits_scaling", "lm_head_multiplier"),
    "mtp_depth": ("num_nextn_predict_layers", "num_mtp_layers"),
    "ckpt_bits": ("quantization_config.bits", "quantization_config.w_bit"),
    "ckpt_group_size": ("quantization_config.group_size", "quantization_config.q_group_size"),
}
# a RoPE parameter, in whichever of its three mappings the file has it (_rope): the field -> the parameter's name
ROPE_PARAMS: dict[str, str] = {
    "attn_temperature": "llama_4_scaling_beta", "attn_temperature_floor": "original_max_position_embeddings",
    "rope_base": "rope_theta", "rope_original_context": "original_max_position_embeddings", "rope_factor": "factor",
    "rope_low_freq_factor": "low_freq_factor", "rope_high_freq_factor": "high_freq_factor",
    "rope_beta_fast": "beta_fast", "rope_beta_slow": "beta_slow", "rope_attention_factor": "attention_factor",
    "rope_mscale_all_dim": "mscale_all_dim", "rope_short_factor": "short_factor", "rope_long_factor": "long_factor"}
# a linear-attention size, flat or in Kimi Linear's linear_attn_config (_linear): the field -> (flat key, nested)
LINEAR_KEYS: dict[str, tuple[str, str]] = {
    "gdn_k_heads": ("linear_num_heads", "num_heads"), "gdn_k_dim": ("linear_head_dim", "head_dim"),
    "gdn_conv_kernel": ("linear_conv_kernel_dim", "short_conv_kernel_size")}
_MISSING = object()


def field_keys(field: str) -> tuple[str, ...]:
    """Every path of a config.json that some family's reader copies into `field`."""
    keys = FIELD_KEYS.get(field, ())
    if field in ROPE_PARAMS:
        keys += _rope(ROPE_PARAMS[field])
    if field in LINEAR_KEYS:
        keys += _linear(*LINEAR_KEYS[field])
    return keys


def in_file_terms(problems: list[str], fields: dict[str, Any], d: dict[str, Any], where: str = "") -> list[str]:
    """ModelConfig's `problems` with the config a reader built from `d` (its `fields`), each at the key of d that
    set the field (where: the prefix of d's keys, e.g. text_config.), else against the whole file."""
    merged: dict[str, list[str]] = {}   # one message per key and complaint, with the fields of ours it set
    for problem in problems:
        field, _, rest = problem.partition(": ")
        key = _key(field, fields, d) if field in fields else None
        if key is not None:   # our field's name too, unless the key has the same name (no path ends in one)
            message, ours = f"{where}{key}: {rest}", [field] if key != field else []
        elif field in FIELDS:
            message, ours = f"config.json: {field} (as imported): {rest}", []
        else:
            message, ours = f"config.json: {problem}", []
        merged.setdefault(message, []).extend(ours)
    return [message + (f" ({', '.join(names)})" if names else "") for message, names in merged.items()]


def _key(field: str, fields: dict[str, Any], d: dict[str, Any]) -> str | None:
    """The one key of d that set `field`: of those that set it in some family, the one holding its value."""
    found = [k for k in field_keys(field) if _same(_at(d, k), fields[field])]
    return found[0] if len(found) == 1 else None


def _at(d: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return _MISSING
        d = d[part]
    return d


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: 8 is 8.0, but true is not 1. (A reader copies a list, e.g. rope_scaling.short_factor,
    as the file holds it, so a list is never compared with a tuple.)"""
    return isinstance(a, bool) == isinstance(b, bool) and a == b
