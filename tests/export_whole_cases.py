"""The cases of tests/test_export_whole.py and tests/test_export_whole_hf.py: each Hugging Face writer's own
preset or published file, and variants reaching its other branches, with the config.json the writer gives."""
from __future__ import annotations

from typing import Any, Callable

from engine.config import ModelConfig
from engine.interop.hf_export import hf_problems
from tests.export_cases import CHANGES, source


def _all_sliding(c: ModelConfig) -> ModelConfig:
    return c.replace(attn_window=c.attn_window or 64, layer_types=("sliding",) * c.n_layers)


def _minimax_sliding(c: ModelConfig) -> ModelConfig:
    return c.replace(attn_window=64, layer_types=tuple("sliding" if t == "full" else t for t in c.layer_types))


def _yarn(c: ModelConfig) -> ModelConfig:
    return c.replace(rope_scaling="yarn", rope_factor=4.0, rope_original_context=c.context_length // 4,
                     rope_mscale_all_dim=1.0)


def _dense(c: ModelConfig) -> ModelConfig:
    return c.replace(**CHANGES["experts added or removed"](c))


def _SAME(c: ModelConfig) -> ModelConfig:
    return c


# name -> (family, source (tests/export_cases.py), change); each family's own config first, then its variants
CASES: dict[str, tuple[str, str, Callable[[ModelConfig], ModelConfig]]] = {
    "gpt2": ("gpt2", "preset:gpt2", _SAME),
    "llama 3.1 (llama3 scaling)": ("llama", "preset:llama-3.1-8b", _SAME),
    "mistral": ("mistral", "preset:mistral-7b", _SAME),
    "mistral, every layer sliding by layer_types": ("mistral", "preset:mistral-7b", _all_sliding),
    "mixtral": ("mixtral", "preset:mixtral-8x7b", _SAME),
    "mixtral, every layer sliding by layer_types": ("mixtral", "preset:mixtral-8x7b", _all_sliding),
    "smollm3": ("smollm3", "preset:smollm3-3b", _SAME),
    "seed_oss": ("seed_oss", "seed-oss-36b-instruct.json", _SAME),
    "llama4_text scout (MoE every layer)": ("llama4_text", "preset:llama-4-scout-17b-16e", _SAME),
    "llama4_text maverick (MoE every 2nd layer)": ("llama4_text", "llama-4-maverick-17b-128e.json", _SAME),
    "llama4_text dense (llama-2)": ("llama4_text", "preset:llama-2-7b", _SAME),
    "granitemoehybrid (MoE, no RoPE)": ("granitemoehybrid", "granite-4.0-h-small.json", _SAME),
    "granitemoehybrid dense with RoPE (llama-2)": ("granitemoehybrid", "preset:llama-2-7b", _SAME),
    "qwen2": ("qwen2", "qwen2.json", _SAME),
    "qwen2, sliding window": ("qwen2", "qwen2.json", lambda c: c.replace(attn_window=64)),
    "qwen3": ("qwen3", "preset:qwen3-0.6b", _SAME),
    "qwen3, YaRN with mscale_all_dim (no MLA)": ("qwen3", "preset:qwen3-0.6b", _yarn),
    "qwen3_moe": ("qwen3_moe", "preset:qwen3-30b-a3b", _SAME),
    "qwen2_moe": ("qwen2_moe", "preset:qwen1.5-moe-a2.7b", _SAME),
    "olmoe": ("olmoe", "preset:olmoe-1b-7b", _SAME),
    "gemma": ("gemma", "gemma_2b.json", _SAME),
    "gemma2": ("gemma2", "preset:gemma-2-2b", _SAME),
    "falcon classic (MQA)": ("falcon", "preset:falcon-7b", _SAME),
    "falcon classic (MHA, serial)": ("falcon", "redpajama_3b_v1.json", _SAME),
    "falcon new architecture (GQA, two norms)": ("falcon", "redpajama_3b_v1.json",
                                                 lambda c: c.replace(block="parallel", n_kv_heads=8)),
    "falcon new architecture (GQA, one norm)": ("falcon", "redpajama_3b_v1.json", lambda c: c.replace(
        block="parallel", n_kv_heads=8, parallel_shared_norm=True)),
    "gpt_neox (partial rotary)": ("gpt_neox", "preset:pythia-160m", _SAME),
    "olmo3": ("olmo3", "preset:olmo-3-7b", _SAME),
    "olmo3 without windows (olmo-2)": ("olmo3", "preset:olmo-2-7b", _SAME),
    "gpt_oss": ("gpt_oss", "preset:gpt-oss-20b", _SAME),
    "deepseek_v3": ("deepseek_v3", "preset:deepseek-v3", _SAME),
    "deepseek_v3 dense, YaRN without mscale_all_dim": (
        "deepseek_v3", "preset:deepseek-v3", lambda c: _dense(c).replace(rope_mscale_all_dim=None)),
    "deepseek_v32": ("deepseek_v32", "preset:deepseek-v3.2", _SAME),
    "glm_moe_dsa": ("glm_moe_dsa", "preset:glm-5", _SAME),
    "deepseek_v2 (greedy)": ("deepseek_v2", "preset:deepseek-v2-lite", _SAME),
    "deepseek_v2 grouped": ("deepseek_v2", "preset:deepseek-v2-lite",
                            lambda c: c.replace(router_groups=8, router_group_topk=2, router_group_score="max")),
    "qwen3_next": ("qwen3_next", "preset:qwen3-next-80b-a3b", _SAME),
    "qwen3_next dense": ("qwen3_next", "preset:qwen3-next-80b-a3b", _dense),
    "qwen3_5_moe_text": ("qwen3_5_moe_text", "preset:qwen3.5-35b-a3b", _SAME),
    "qwen3_5_text": ("qwen3_5_text", "preset:qwen3.5-9b", _SAME),
    "qwen3_5_text, bf16 state": ("qwen3_5_text", "preset:qwen3.5-9b", lambda c: c.replace(state_dtype="bf16")),
    "qwen3_5_text, state dtype unset": ("qwen3_5_text", "preset:qwen3.5-9b", lambda c: c.replace(state_dtype=None)),
    "kimi_linear": ("kimi_linear", "preset:kimi-linear-48b-a3b", _SAME),
    "kimi_linear dense, a vocabulary without the pad id": (
        "kimi_linear", "preset:kimi-linear-48b-a3b", lambda c: _dense(c).replace(vocab_size=32000)),
    "glm4_moe": ("glm4_moe", "preset:glm-4.5-air", _SAME),
    "dots1": ("dots1", "dots.llm1.inst.json", _SAME),
    "ernie4_5_moe": ("ernie4_5_moe", "ernie-4.5-21b-a3b-pt.json", _SAME),
    "exaone4 without windows": ("exaone4", "exaone-4.0-1.2b.json", _SAME),
    "exaone4 with windows": ("exaone4", "exaone-4.0-32b.json", _SAME),
    "ministral3": ("ministral3", "preset:ministral-3-3b", _SAME),
    "ministral3, every layer sliding by layer_types": ("ministral3", "preset:ministral-3-3b", _all_sliding),
    "jamba": ("jamba", "preset:jamba-v0.1", _SAME),
    "jamba dense": ("jamba", "preset:jamba-v0.1", _dense),
    "nemotron_h (MoE)": ("nemotron_h", "preset:nemotron-3-nano-30b-a3b", _SAME),
    "nemotron_h dense": ("nemotron_h", "preset:nemotron-h-8b", _SAME),
    "nemotron_h dense, bf16 state": ("nemotron_h", "preset:nemotron-h-8b", lambda c: c.replace(state_dtype="bf16")),
    "nemotron_h dense, fp16 state": ("nemotron_h", "preset:nemotron-h-8b", lambda c: c.replace(state_dtype="fp16")),
    "minimax": ("minimax", "minimax-text-01.json", _SAME),
    "minimax, sliding attention layers": ("minimax", "minimax-text-01.json", _minimax_sliding),
    "bamba": ("bamba", "tiny-bamba", _SAME),
    "falcon_h1": ("falcon_h1", "tiny-falcon-h1", _SAME),
}


def written(name: str) -> tuple[ModelConfig, dict[str, Any]]:
    """The case's config and the family's config.json for it (the family writes it exactly)."""
    family, src, change = CASES[name]
    cfg = change(source(src))
    out, problems = hf_problems(cfg, family)
    assert problems == [], problems
    return cfg, out
