"""The configs every Hugging Face writer is held on (tests/test_export_messages.py, tests/test_export_transformers.py):
each family with every preset and published config.json (tests/data/hf_configs) it writes exactly, tiny configs
for the families without one, and the single-field changes each writer is tried with."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from engine.config import ConfigError, ModelConfig
from engine.interop import from_hf_config
from engine.presets import PRESETS

DATA = Path(__file__).parent / "data" / "hf_configs"
_SSM = dict(vocab_size=61, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=24,
            max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None)
TINY = {   # families no preset or published file here exports to (the parity cases of tests/test_interop_ssm.py)
    "tiny-bamba": {"model_type": "bamba", **_SSM, "num_hidden_layers": 3, "attn_layer_indices": [1],
                   "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_d_state": 6, "mamba_n_groups": 2,
                   "mamba_chunk_size": 4},
    "tiny-falcon-h1": {"model_type": "falcon_h1", **_SSM, "num_hidden_layers": 2, "mamba_d_ssm": 64,
                       "mamba_n_heads": 4, "mamba_d_state": 6, "mamba_n_groups": 2, "mamba_chunk_size": 4,
                       "ssm_multipliers": [0.5, 1.5, 2.0, 0.25, 3.0], "ssm_in_multiplier": 0.7,
                       "ssm_out_multiplier": 1.3, "key_multiplier": 0.8, "attention_out_multiplier": 0.9,
                       "mlp_multipliers": [0.6, 1.4], "embedding_multiplier": 2.0, "lm_head_multiplier": 0.5},
}


def source(name: str) -> ModelConfig:
    """A preset ('preset:NAME'), a published file ('FILE.json') or a TINY config."""
    if name.startswith("preset:"):
        return PRESETS[name[len("preset:"):]].config
    d = TINY[name] if name in TINY else json.loads((DATA / name).read_text())
    return from_hf_config(d)


def _layers(c: ModelConfig, kind: str) -> dict[str, Any]:
    """The first layer's kind replaced (every layer 'full' or 'sliding' when the config names none)."""
    kinds = list(c.layer_types or ["full" if c.attn_window is None else "sliding"] * c.n_layers)
    kinds[0] = kind
    return dict(layer_types=tuple(kinds), attn_chunk=c.attn_chunk or (8 if "chunked" in kind else None),
                attn_window=c.attn_window or (8 if "sliding" in kind else None))


def _flip(field: str) -> Callable[[ModelConfig], dict[str, Any]]:
    return lambda c: {field: not getattr(c, field)}


def _other(field: str, value: Any, fallback: Any) -> Callable[[ModelConfig], dict[str, Any]]:
    return lambda c: {field: value if getattr(c, field) != value else fallback}


def _moe(c: ModelConfig) -> dict[str, Any]:
    if c.n_experts is None:
        return dict(n_experts=4, experts_per_token=2)
    return dict(n_experts=None, n_shared_experts=None, shared_d_ff=None, moe_first_dense=None, moe_every=1,
                expert_d_ff=None, shared_expert_gate=False, router_selection_bias=False, router_groups=1,
                selection_bias_parameter=False, router_scales_input=False, ffn_types=None)


def _mla(c: ModelConfig) -> dict[str, Any]:
    if c.kv_lora_rank is None:
        return dict(kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, position="rope")
    return dict(kv_lora_rank=None, q_lora_rank=None, index_topk=None, indexer_types=None, mla_norm_eps=None)


def _indexer(c: ModelConfig) -> dict[str, Any]:
    if c.index_topk is not None:
        return dict(index_topk=None, indexer_types=None)
    mla = _mla(c) if c.kv_lora_rank is None else {}
    rope = mla.get("qk_rope_head_dim", c.qk_rope_head_dim)
    return dict(mla, index_topk=4, index_n_heads=2, index_head_dim=2 * rope)


def _first_ffn(c: ModelConfig) -> dict[str, Any]:
    kinds = [s.ffn for s in c.layer_specs]
    kinds[0] = "moe" if kinds[0] == "dense" else "dense"
    return dict(ffn_types=tuple(kinds))


CHOICES = {   # the fields with a few values: each other value in turn
    "norm": ("layernorm", "rmsnorm"), "norm_placement": ("pre", "post", "sandwich", "post_branch"),
    "block": ("serial", "parallel"), "position": ("learned", "rope", "none"), "qk_norm_scope": ("head", "all_heads", "rope_heads"),
    "router": ("softmax_topk", "topk_softmax", "sigmoid"), "router_group_score": ("top2_sum", "max"),
    "ssm_gate": ("norm_gated", "gate_normed", "gate"), "state_dtype": (None, "bf16"),
    "attn_gate": (None, "elementwise", "head"), "attn_temperature_layers": ("all", "nope"),
    "rope_scaling": ("none", "linear", "yarn"),
    "ffn": ("gelu", "gelu_tanh", "relu", "relu2", "swiglu", "geglu", "reglu", "swiglu_clamped"),
}
CHANGES: dict[str, Callable[[ModelConfig], dict[str, Any]]] = {
    f"{field}={value}": (lambda c, f=field, v=value: {f: v}) for field, values in CHOICES.items() for value in values}
CHANGES.update({f"{field} flipped": _flip(field) for field in (
    "bias", "qkv_bias", "final_norm", "embed_norm", "norm_affine", "embed_scale", "head_bias", "qk_norm", "attn_sinks",
    "router_renorm", "router_selection_bias", "expert_bias", "shared_expert_gate", "router_scales_input",
    "mla_rope_interleave", "index_rope_interleave", "ssm_dt_norm", "attn_temperature_one_based",
    "parallel_shared_norm", "tie_embeddings", "ssm_conv_bias", "ssm_proj_bias")})
CHANGES.update({f"{field}={value}": _other(field, value, fallback) for field, value, fallback in (
    ("residual_alpha", 2.0, 1.0), ("logit_scale", 0.5, 1.0), ("attn_out_scale", 0.5, 1.0),
    ("ffn_gate_scale", 0.5, 1.0), ("ffn_out_scale", 0.5, 1.0), ("embed_multiplier", 2.0, 1.0),
    ("ssm_in_scale", 0.5, 1.0), ("ssm_out_scale", 0.5, 1.0), ("ssm_proj_scales", (0.5, 1.5, 2.0, 0.25, 3.0), None),
    ("routed_scale", 2.0, 1.0), ("dropout", 0.1, 0.0), ("attn_scale", 0.125, None), ("attn_scale", 0.3, None), ("attn_softcap", 50.0, None),
    ("logit_softcap", 30.0, None), ("rope_local_base", 10000.0, None), ("nope_layers", (1,), None),
    ("attn_temperature", 0.1, None), ("mtp_depth", 1, None), ("attn_window", 8, None), ("rope_fraction", 0.5, 1.0),
    ("moe_first_dense", 1, None), ("moe_every", 2, 1), ("ssm_dt_max", 5.0, None), ("norm_eps", 1e-6, 1e-5),
    ("mla_norm_eps", 1e-5, None), ("context_length", 1000, 2000), ("indexer_types", None, None))})
CHANGES.update({
    "norm_bias=False": lambda c: dict(norm_bias=False),
    "embed_dropout off, dropout 0.1": lambda c: dict(embed_dropout=False, dropout=0.1),
    "selection bias a parameter": lambda c: dict(router_selection_bias=True, selection_bias_parameter=True),
    "experts added or removed": _moe,
    "MLA added or removed": _mla,
    "indexer added or removed": _indexer,
    "q_lora_rank flipped": lambda c: dict(q_lora_rank=None if c.q_lora_rank else 16),
    "indexer shared": lambda c: dict(indexer_types=("full",) + ("shared",) * (c.n_layers - 1)),
    "dynamic scaling from half the context": lambda c: dict(rope_scaling="dynamic", rope_factor=2.0,
                                                          rope_original_context=c.context_length // 2),
    "n_kv_heads halved or all": lambda c: dict(n_kv_heads=c.n_heads if c.kv_heads != c.n_heads else c.n_heads // 2),
    "n_kv_heads=1": lambda c: dict(n_kv_heads=1),
    "head_dim halved": lambda c: dict(head_dim=c.head_width // 2),
    "global_every=2": lambda c: dict(global_every=2, attn_window=c.attn_window or 8),
    "expert_d_ff halved": lambda c: dict(expert_d_ff=c.expert_width // 2, n_experts=c.n_experts or 4),
    "shared_d_ff doubled": lambda c: dict(shared_d_ff=2 * c.expert_width, n_shared_experts=c.n_shared_experts or 1,
                                          n_experts=c.n_experts or 4),
    "n_shared_experts +1": lambda c: dict(n_shared_experts=(c.n_shared_experts or 0) + 1, n_experts=c.n_experts or 4),
    "router_groups doubled": lambda c: dict(router_groups=2 * c.router_groups, router_group_topk=1),
    "no shared experts": lambda c: dict(n_shared_experts=None, shared_d_ff=None, shared_expert_gate=False),
    "biases on q, k, v only": lambda c: dict(bias=False, qkv_bias=True),
    "one window, no layer_types": lambda c: dict(layer_types=None, global_every=2, attn_window=c.attn_window or 8),
    "rope_scaling=linear without a local base": lambda c: dict(rope_scaling="linear", rope_factor=2.0,
                                                               rope_local_base=None),
    "first FFN dense or MoE": _first_ffn,
    "ffn_types all dense": lambda c: dict(ffn_types=("dense",) * c.n_layers),
    "ssm_heads +1": lambda c: dict(ssm_heads=c.ssm_head_count + 1),
    "ssm_inner 1.5 x d_model": lambda c: dict(ssm_inner=c.d_model * 3 // 2),
    "gdn_v_heads doubled": lambda c: dict(gdn_v_heads=2 * (c.gdn_v_heads or c.n_heads)),
    "attn_temperature_floor=100": lambda c: dict(attn_temperature=c.attn_temperature or 0.1,
                                                 attn_temperature_floor=100),
})
CHANGES.update({f"first layer {k}": (lambda c, k=k: _layers(c, k)) for k in (
    "full", "sliding", "chunked", "gdn", "kda", "lightning", "mamba2", "mamba1", "none", "full+mamba2")})


def changed(cfg: ModelConfig, label: str) -> ModelConfig | None:
    """cfg with one change applied; None when it leaves cfg as it is or makes an invalid config."""
    changes = CHANGES[label](cfg)
    if all(getattr(cfg, k) == v for k, v in changes.items()):
        return None
    try:
        return cfg.replace(**changes)
    except (ConfigError, ValueError):
        return None


# family -> the configs it is held on: among every preset and published file the family writes exactly, a few that
# together reach every refusal (writer line and field) any of them reaches, and the family's own preset
SOURCES = {
    "gpt2": ["preset:gpt2"],
    "llama": ["preset:llama-2-7b", "preset:llama-3.1-8b"],
    "mistral": ["preset:llama-2-7b", "preset:phi-3.5-mini", "preset:mistral-7b"],
    "mixtral": ["preset:mixtral-8x7b"],
    "smollm3": ["preset:llama-2-7b", "preset:llama-3.1-8b", "preset:smollm3-3b"],
    "seed_oss": ["preset:llama-2-7b", "preset:llama-3.1-8b", "seed-oss-36b-instruct.json"],
    "llama4_text": ["preset:llama-4-scout-17b-16e", "preset:llama-2-7b", "llama-4-maverick-17b-128e.json"],
    "granitemoehybrid": ["granite-4.0-h-small.json", "preset:llama-2-7b", "preset:llama-3.1-8b"],
    "qwen2": ["qwen2.json"],
    "qwen3": ["preset:qwen3-0.6b"],
    "qwen3_moe": ["preset:qwen3-30b-a3b"],
    "gemma2": ["preset:gemma-2-2b"],
    "falcon": ["redpajama_3b_v1.json", "preset:falcon-7b"],
    "gpt_neox": ["redpajama_3b_v1.json", "preset:pythia-160m"],
    "olmo3": ["preset:olmo-3-7b", "preset:olmo-2-7b"],
    "qwen2_moe": ["preset:qwen1.5-moe-a2.7b"],
    "olmoe": ["preset:olmoe-1b-7b"],
    "gpt_oss": ["preset:gpt-oss-20b"],
    "deepseek_v3": ["preset:deepseek-v3", "preset:kimi-k2"],
    "deepseek_v32": ["preset:deepseek-v3.2"],
    "glm_moe_dsa": ["preset:glm-5"],
    "deepseek_v2": ["preset:deepseek-v2-lite"],
    "qwen3_next": ["preset:qwen3-next-80b-a3b"],
    "qwen3_5_moe_text": ["preset:qwen3-next-80b-a3b", "preset:qwen3.5-35b-a3b"],
    "qwen3_5_text": ["preset:qwen3.5-9b"],
    "kimi_linear": ["preset:kimi-linear-48b-a3b"],
    "glm4_moe": ["dots.llm1.inst.json", "preset:glm-4.5-air"],
    "ministral3": ["preset:ministral-3-3b"],
    "jamba": ["preset:jamba-v0.1"],
    "nemotron_h": ["preset:nemotron-3-nano-30b-a3b", "preset:nemotron-h-8b"],
    "dots1": ["dots.llm1.inst.json"],
    "ernie4_5_moe": ["ernie-4.5-21b-a3b-pt.json"],
    "exaone4": ["exaone-4.0-1.2b.json", "exaone-4.0-32b.json"],
    "gemma": ["gemma_2b.json"],
    "minimax": ["minimax-text-01.json"],
    "bamba": ["tiny-bamba"],
    "falcon_h1": ["tiny-falcon-h1"],
}
CASES = [(family, name) for family, names in SOURCES.items() for name in names]
