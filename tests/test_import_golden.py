"""Every refusal import-hf can give, word for word (tests/golden/import_messages.json, the reviewed texts).

Two sources of bad input: every key of every published config (tests/data/hf_configs) changed the way a user's typo
would change it (as tests/test_import_messages.py changes them), and, per refusal site of the readers
(engine/interop/hf_*.py: each r.bad, r.expect and r.act, ConfigError of import_hf, hf_keys' restatement, hf_quant's
quantization_config), a published config or a bare one changed so that site refuses. A message that names another
key, loses the value, changes its reason or gives none fails here; so does a refusal that no longer happens, or
one that starts to. The last test checks that the cases still reach every refusal site of the readers.
"""
from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.config import ConfigError
from engine.interop import hf_reader
from engine.interop.hf_config import import_hf
from tests.golden import GOLDEN as GOLDEN_DIR, check_golden
from tests.import_typos import changed, leaves, typos, wrong_names

DATA = Path(__file__).parent / "data" / "hf_configs"
PUBLISHED = sorted(p.name for p in DATA.glob("*.json") if p.name not in ("index.json", "recent.json"))
GOLDEN = "import_messages"
DEL = object()   # a change that deletes the key


def _problems(d: Any) -> list[str]:
    """import_hf's problems with d, [] when it imports."""
    try:
        import_hf(d)
    except ConfigError as e:
        return list(e.problems)
    return []


def _check(key: str, got: Any) -> None:
    """got against the reviewed value of key; for a mapping, every entry that differs is shown, not the whole."""
    try:
        check_golden(GOLDEN, key, got)
    except AssertionError:
        stored = json.loads((GOLDEN_DIR / f"{GOLDEN}.json").read_text()).get(key)
        if not isinstance(got, dict) or not isinstance(stored, dict):
            raise
        wrong = [f"{k}:\n  reviewed: {stored.get(k)!r}\n  now:      {got.get(k)!r}"
                 for k in sorted(set(stored) | set(got)) if stored.get(k) != got.get(k)]
        raise AssertionError(f"{key}: {len(wrong)} of {len(got)} changed:\n" + "\n".join(wrong[:8])) from None


def _label(value: Any, typo: Any) -> str:
    """How a typo reads in a golden key: `= -1`, `= "no-such-value"`, `= true` (the value as JSON), `[:-1]` (a list
    one entry short)."""
    if isinstance(value, list):
        return "[:-1]"
    return f"= {json.dumps(typo)}"


@pytest.mark.parametrize("name", PUBLISHED)
def test_every_typo_in_a_published_config_reads_as_reviewed(name: str) -> None:
    """Each typo's problems word for word; and where the file imports as published, every problem names a key
    the file has (or `config.json`) and a -1 is refused at the key that holds it (test_import_messages.wrong_names)."""
    text = (DATA / name).read_text()
    imports = _problems(json.loads(text)) == []
    got, wrong = {}, []
    for path, value in leaves(json.loads(text)):
        for typo in typos(value):
            d = changed(text, path, typo)
            got[f"{'.'.join(path)} {_label(value, typo)}"] = problems = _problems(d)
            if imports:
                wrong += wrong_names(d, path, typo, problems)
    assert not wrong, "\n".join(wrong[:10])
    _check(name, got)


def _file(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def _built(base: str, changes: dict[str, Any]) -> dict[str, Any]:
    """A published config (base ends in .json) or a bare one of that model_type, with dotted keys set (DEL: removed)."""
    d = _file(base) if base.endswith(".json") else {"model_type": base}
    for dotted, value in changes.items():
        *outer, last = dotted.split(".")
        inner = d
        for key in outer:
            inner = inner.setdefault(key, {})
        if value is DEL:
            del inner[last]
        else:
            inner[last] = value
    return d


_GEMMA3 = "gemma-3-27b-it.json"
_LLAMA4 = "llama-4-scout-17b-16e.json"
_FP8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}

# label -> (published file or bare model_type, changes): one or more per refusal site
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    # hf_config.import_hf: the file as a whole, its types, the wrapper, the family
    "config.json is a list": ("gpt2.json", {}),   # the file wrapped in a list (_case)
    "a size of the wrong type": ("gpt2.json", {"n_embd": "big"}),
    "a text_config size of the wrong type": (_GEMMA3, {"text_config.hidden_size": "big"}),
    "text_config is not a mapping": (_GEMMA3, {"text_config": [1]}),
    "an unknown family": ("gpt2.json", {"model_type": "gpt3"}),
    "an unknown family inside text_config": (_GEMMA3, {"text_config.model_type": "gpt3"}),
    "a family refused by name": ("lfm2-1.2b.json", {}),
    "a family refused by name inside text_config": ("gemma-4-e2b-it.json", {}),
    "a setting that breaks the reader": ("deepseek-v3.json", {"first_k_dense_replace": "three"}),
    "an MPT size of the wrong type": ("mpt_7b_instruct.json", {"d_model": "big"}),
    "an unknown key": ("gpt2.json", {"wobble": 1}),
    "an unknown key inside text_config": (_GEMMA3, {"text_config.wobble": 1}),
    # hf_keys: ModelConfig's refusals at the file's key, in each mapping a RoPE parameter or a linear size sits in
    "rope_scaling.factor below 0": ("llama3_1_8b.json", {"rope_scaling.factor": -1.0}),
    "rope_parameters.factor below 0": ("ministral-3-3b-instruct-2512.json",
                                       {"text_config.rope_parameters.factor": -1.0}),
    "rope_parameters.full_attention.factor below 0": ("olmo-3-32b.json", {"rope_scaling.factor": -1.0}),
    "rope_parameters.rope_theta below 1": ("glm-5.json", {"rope_parameters.rope_theta": 0.5}),
    "linear_attn_config.num_heads below 1": ("kimi-linear-48b-a3b.json", {"linear_attn_config.num_heads": -1}),
    "linear_num_key_heads below 1": ("qwen3-next-80b-a3b.json", {"linear_num_key_heads": -1}),
    "a value computed from two keys": ("gpt2.json", {"n_embd": -1}),
    # hf_reader
    "layer_types of another length": ("qwen2_7b.json", {"layer_types": ["full_attention"]}),
    "layer_types with an unknown kind": ("gemma2_2b.json", {"layer_types": ["chunked_attention"] * 26}),
    "Llama attention_dropout": ("llama3_1_8b.json", {"attention_dropout": 0.1}),
    "GPT-2 dropouts that differ": ("gpt2.json", {"resid_pdrop": 0.2}),
    "GPT-NeoX head_dim not hidden_size // heads": ("redpajama_3b_v1.json", {"head_dim": 64}),
    "GPT-NeoX heads that do not divide hidden_size": ("redpajama_3b_v1.json", {"num_attention_heads": 30}),
    # hf_classic
    "GPT-2 unscaled scores": ("gpt2.json", {"scale_attn_weights": False}),
    "GPT-2 scores scaled by layer": ("gpt2.json", {"scale_attn_by_inverse_layer_idx": True}),
    "GPT-2 cross-attention": ("gpt2.json", {"add_cross_attention": True}),
    "GPT-2 activation": ("gpt2.json", {"activation_function": "no-such-act"}),
    "GPT-BigCode activation": ("gpt_bigcode.json", {"activation_function": "no-such-act"}),
    "GPT-NeoX attention_bias false": ("redpajama_3b_v1.json", {"attention_bias": False}),
    "GPT-NeoX activation": ("redpajama_3b_v1.json", {"hidden_act": "no-such-act"}),
    "Falcon ALiBi": ("falcon", {"alibi": True}),
    "Falcon post-norm residual": ("falcon", {"apply_residual_connection_post_layernorm": True}),
    "Falcon hidden_dropout": ("falcon", {"hidden_dropout": 0.1}),
    "Falcon attention_dropout": ("falcon", {"attention_dropout": 0.1}),
    "Falcon new architecture, serial": ("falcon", {"new_decoder_architecture": True, "parallel_attn": False}),
    "Falcon classic parallel block, two norms": ("falcon", {"num_ln_in_parallel_attn": 2}),
    "Falcon activation": ("falcon", {"activation": "no-such-act"}),
    "Falcon heads that do not divide hidden_size": ("falcon", {"num_attention_heads": 7}),
    "BLOOM post-norm residual": ("bloom", {"apply_residual_connection_post_layernorm": True}),
    "BLOOM hidden_dropout": ("bloom", {"hidden_dropout": 0.1}),
    "StableLM QK-norm": ("stablelm.json", {"qk_layernorm": True}),
    "StableLM hidden_dropout": ("stablelm.json", {"hidden_dropout": 0.1}),
    "StableLM activation": ("stablelm.json", {"hidden_act": "no-such-act"}),
    "StarCoder2 activation": ("starcoder2.json", {"hidden_act": "no-such-act"}),
    "Phi QK-norm": ("phi-1_5.json", {"qk_layernorm": True}),
    "Phi activation": ("phi-1_5.json", {"hidden_act": "no-such-act"}),
    "MPT heads not a power of two": ("mpt_7b_instruct.json", {"n_heads": 24, "d_model": 4104}),
    "MPT attn_config a list": ("mpt_7b_instruct.json", {"attn_config": [1]}),
    "MPT attn_config.clip_qkv": ("mpt_7b_instruct.json", {"attn_config.clip_qkv": 8}),
    # hf_llama_like
    "Llama attention_bias without mlp_bias": ("llama3_1_8b.json", {"attention_bias": True}),
    "Llama activation": ("llama3_1_8b.json", {"hidden_act": "no-such-act"}),
    "Mistral activation": ("mistral_7b.json", {"hidden_act": "no-such-act"}),
    "Qwen2 multimodal RoPE": ("qwen2_7b.json", {"use_mrope": True}),
    "Qwen2 activation": ("qwen2_7b.json", {"hidden_act": "no-such-act"}),
    "Qwen3 attention_bias": ("qwen3-8b.json", {"attention_bias": True}),
    "Gemma attention_bias": ("gemma_2b.json", {"attention_bias": True}),
    "Gemma bidirectional": ("gemma_2b.json", {"use_bidirectional_attention": True}),
    "Gemma hidden_act": ("gemma_2b.json", {"hidden_act": "no-such-act"}),
    "Gemma hidden_activation disagrees": ("gemma_2b.json", {"hidden_activation": "silu"}),
    "Gemma-2 query_pre_attn_scalar 0": ("gemma2_2b.json", {"query_pre_attn_scalar": 0}),
    "Gemma-2 hidden_activation": ("gemma2_2b.json", {"hidden_activation": "no-such-act"}),
    "Phi-3 activation": ("phi-3_5.json", {"hidden_act": "no-such-act"}),
    "OLMo-2 attention_bias": ("olmo2_7b.json", {"attention_bias": True}),
    "OLMo-2 activation": ("olmo2_7b.json", {"hidden_act": "no-such-act"}),
    "Cohere QK-norm": ("aya-23.json", {"use_qk_norm": True}),
    "Cohere attention_bias": ("aya-23.json", {"attention_bias": True}),
    "Cohere attention_dropout": ("aya-23.json", {"attention_dropout": 0.1}),
    "Cohere activation": ("aya-23.json", {"hidden_act": "no-such-act"}),
    # hf_rope
    "a sliding mapping with scaling": ("olmo-3-7b.json", {"rope_scaling": DEL, "rope_parameters": {
        "full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "linear", "factor": 2.0}}}),
    "a whole-head family given a fraction": ("llama3_1_8b.json", {"partial_rotary_factor": 0.5}),
    "an odd rotary share": ("phi-1_5.json", {"partial_rotary_factor": 0.3}),
    "an unknown RoPE type (rope_type)": ("llama3_1_8b.json", {"rope_scaling.rope_type": "su"}),
    "an unknown RoPE type (type)": ("deepseek-v2-lite.json", {"rope_scaling": {"type": "su", "factor": 2.0}}),
    "a parameter no RoPE type has": ("llama3_1_8b.json", {"rope_scaling.wobble": 1.0}),
    "linear RoPE without a factor": ("llama3_1_8b.json", {"rope_scaling": {"rope_type": "linear"}}),
    # hf_moe
    "Mixtral router jitter": ("mixtral-8x7b.json", {"router_jitter_noise": 0.1}),
    "Mixtral activation": ("mixtral-8x7b.json", {"hidden_act": "no-such-act"}),
    "Qwen2-MoE dense layers not first": ("qwen1.5-moe-a2.7b.json", {"mlp_only_layers": [1]}),
    "Qwen2-MoE every layer dense": ("qwen1.5-moe-a2.7b.json", {"mlp_only_layers": list(range(24))}),
    "Qwen2-MoE sliding windows": ("qwen1.5-moe-a2.7b.json", {"use_sliding_window": True}),
    "Qwen3-MoE attention_bias": ("qwen3-30b-a3b.json", {"attention_bias": True}),
    "OLMoE head_dim": ("olmoe-1b-7b.json", {"head_dim": 64}),
    "OLMoE clip_qkv": ("olmoe-1b-7b.json", {"clip_qkv": 8.0}),
    # hf_deepseek
    "DeepSeek mscale_all_dim without yarn": ("deepseek-v2-lite.json", {"rope_scaling": {
        "type": "linear", "factor": 2.0, "mscale_all_dim": 0.707}}),
    "DeepSeek key/value heads": ("deepseek-v3.json", {"num_key_value_heads": 8}),
    "DeepSeek attention_dropout": ("deepseek-v3.json", {"attention_dropout": 0.1}),
    "DeepSeek attention_bias": ("deepseek-v3.json", {"attention_bias": True}),
    "DeepSeek moe_layer_freq": ("deepseek-v3.json", {"moe_layer_freq": 2}),
    "DeepSeek activation": ("deepseek-v3.json", {"hidden_act": "no-such-act"}),
    "DeepSeek-V2 without num_experts_per_tok": ("deepseek-v2-lite.json", {"num_experts_per_tok": DEL}),
    "DeepSeek-V3 topk_method": ("deepseek-v3.json", {"topk_method": "greedy"}),
    "DeepSeek-V3 scoring_func": ("deepseek-v3.json", {"scoring_func": "softmax"}),
    "DeepSeek-V2 mlp_bias": ("deepseek-v2-lite.json", {"mlp_bias": True}),
    "DeepSeek-V2 scoring_func": ("deepseek-v2-lite.json", {"scoring_func": "sigmoid"}),
    "DeepSeek-V2 norm_topk_prob": ("deepseek-v2-lite.json", {"norm_topk_prob": True}),
    "DeepSeek-V2 topk_method": ("deepseek-v2-lite.json", {"topk_method": "noaux_tc"}),
    "DeepSeek-V2 groups without n_group": ("deepseek-v2-lite.json", {"topk_method": "group_limited_greedy",
                                                                     "n_group": DEL}),
    "DeepSeek-V2 groups without topk_group": ("deepseek-v2-lite.json", {"topk_method": "group_limited_greedy",
                                                                        "topk_group": DEL}),
    # hf_dsa
    "DSA mlp_layer_types out of order": ("deepseek-v3.2.json", {"mlp_layer_types": ["sparse"] + ["dense"] * 60}),
    "GLM-5 indexer_types starting shared": ("glm-5.json", {"indexer_types": ["shared"] + ["full"] * 77}),
    "GLM-5 index_topk_pattern too short": ("glm-5.json", {"index_topk_pattern": "FSS"}),
    "DSA rope_interleave false": ("deepseek-v3.2.json", {"rope_interleave": False}),
    "DSA layer_types not indexed": ("deepseek-v3.2.json", {"layer_types": ["full_attention"] * 61}),
    "GLM-5 indexer_rope_interleave false": ("glm-5.json", {"indexer_rope_interleave": False}),
    "DeepSeek-V4": ("deepseek_v4", {}),
    "DeepSeek-V4 with its layer kinds": ("deepseek_v4", {"hc_mult": 2, "layer_types": ["csa"], "o_groups": 4}),
    # hf_gpt_oss
    "gpt-oss layer_types": ("gpt-oss-20b.json", {"layer_types": ["full_attention"]}),
    # hf_kimi
    "Kimi layer number 0": ("kimi-linear-48b-a3b.json", {"linear_attn_config.kda_layers": [0]}),
    "Kimi full_attn_layers past the last": ("kimi-linear-48b-a3b.json", {"linear_attn_config.full_attn_layers": [99]}),
    "Kimi a layer in neither list": ("kimi-linear-48b-a3b.json", {"num_hidden_layers": 28}),
    "Kimi layer_types": ("kimi-linear-48b-a3b.json", {"layer_types": ["linear_attention"]}),
    "Kimi mlp_layer_types": ("kimi-linear-48b-a3b.json", {"mlp_layer_types": ["dense"]}),
    "Kimi linear_attn_config a list": ("kimi-linear-48b-a3b.json", {"linear_attn_config": [1]}),
    "Kimi linear_attn_config key not read": ("kimi-linear-48b-a3b.json", {"linear_attn_config.gate_low_rank_dim": 16}),
    "Kimi key/value heads": ("kimi-linear-48b-a3b.json", {"num_key_value_heads": 8}),
    "Kimi attention_bias": ("kimi-linear-48b-a3b.json", {"attention_bias": True}),
    "Kimi attention_dropout": ("kimi-linear-48b-a3b.json", {"attention_dropout": 0.1}),
    "Kimi rotates MLA keys": ("kimi-linear-48b-a3b.json", {"mla_use_nope": False}),
    "Kimi softmax router": ("kimi-linear-48b-a3b.json", {"moe_router_activation_func": "softmax"}),
    "Kimi ungrouped top-k": ("kimi-linear-48b-a3b.json", {"use_grouped_topk": False}),
    "Kimi GELU": ("kimi-linear-48b-a3b.json", {"hidden_act": "gelu"}),
    "Kimi unknown activation": ("kimi-linear-48b-a3b.json", {"hidden_act": "no-such-act"}),
    "Kimi moe_layer_freq": ("kimi-linear-48b-a3b.json", {"moe_layer_freq": 2}),
    # hf_llama4
    "Llama 4 moe_layers not every k-th": (_LLAMA4, {"text_config.moe_layers": [0, 2, 5]}),
    "Llama 4 attention_bias": (_LLAMA4, {"text_config.attention_bias": True}),
    "Llama 4 router jitter": (_LLAMA4, {"text_config.router_jitter_noise": 0.5}),
    "Llama 4 chunks without a chunk size": (_LLAMA4, {"text_config.attention_chunk_size": None,
                                                      "text_config.layer_types": ["chunked_attention"] * 48}),
    "Llama 4 no_rope_layers": (_LLAMA4, {"text_config.no_rope_layers": [2]}),
    "Llama 4 activation": (_LLAMA4, {"text_config.hidden_act": "no-such-act"}),
    # hf_minimax
    "MiniMax layer_types": ("minimax-text-01.json", {"layer_types": ["full_attention"]}),
    "MiniMax remote-code key": ("minimax-text-01.json", {"layernorm_mlp_beta": 1.0}),
    "MiniMax router jitter": ("minimax-text-01.json", {"router_jitter_noise": 0.1}),
    "MiniMax alphas that differ": ("minimax-text-01.json", {"mlp_alpha_factor": 1.0}),
    "MiniMax a beta other than 1": ("minimax-text-01.json", {"linear_attn_beta_factor": 2.0}),
    "MiniMax alpha 0": ("minimax-text-01.json", dict.fromkeys(
        ("full_attn_alpha_factor", "linear_attn_alpha_factor", "mlp_alpha_factor"), 0.0)),
    "MiniMax GELU": ("minimax-text-01.json", {"hidden_act": "gelu"}),
    "MiniMax unknown activation": ("minimax-text-01.json", {"hidden_act": "no-such-act"}),
    # hf_quant
    "quantization_config one layer kept": ("llama3_1_8b.json", {"quantization_config": {
        **_FP8, "modules_to_not_convert": ["model.layers.3.mlp"]}}),
    "quantization_config not a mapping": ("llama3_1_8b.json", {"quantization_config": "int8"}),
    "fp8 blocks not square": ("llama3_1_8b.json", {"quantization_config": {**_FP8, "weight_block_size": [128, 64]}}),
    "bitsandbytes neither 4 nor 8 bit": ("llama3_1_8b.json", {"quantization_config": {
        "quant_method": "bitsandbytes"}}),
    "bitsandbytes int4": ("llama3_1_8b.json", {"quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "int4"}}),
    "AWQ exllama": ("llama3_1_8b.json", {"quantization_config": {"quant_method": "awq", "version": "exllama"}}),
    "GPTQ one group per row": ("llama3_1_8b.json", {"quantization_config": {"quant_method": "gptq", "bits": 4,
                                                                            "group_size": -1}}),
    "GPTQ without bits": ("llama3_1_8b.json", {"quantization_config": {"quant_method": "gptq"}}),
    "compressed-tensors group without weights": ("llama3_1_8b.json", {"quantization_config": {
        "quant_method": "compressed-tensors", "config_groups": {"group_0": {"input_activations": {"num_bits": 8}}}}}),
    "an unknown quant_method": ("llama3_1_8b.json", {"quantization_config": {"quant_method": "hqq"}}),
    "compressed-tensors int4": ("llama3_1_8b.json", {"quantization_config": {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}}}}),
    # hf_qwen_hybrid
    "Qwen3-Next layer_types": ("qwen3-next-80b-a3b.json", {"layer_types": ["full_attention"]}),
    "Qwen3-Next attention_bias": ("qwen3-next-80b-a3b.json", {"attention_bias": True}),
    "Qwen3-Next GELU": ("qwen3-next-80b-a3b.json", {"hidden_act": "gelu"}),
    "Qwen3.5 no output gate": ("qwen3.5-9b.json", {"text_config.attn_output_gate": False}),
    "Qwen3.5 state dtype": ("qwen3.5-9b.json", {"text_config.mamba_ssm_dtype": "int8"}),
    "Qwen3-Next without a shared expert": ("qwen3-next-80b-a3b.json", {"shared_expert_intermediate_size": 0}),
    # hf_recent
    "SmolLM3 no_rope_layers short": ("smollm3-3b-base.json", {"no_rope_layers": [1, 0]}),
    "SmolLM3 sliding layers, windows off": ("smollm3-3b-base.json", {
        "sliding_window": 4096, "layer_types": ["sliding_attention"] * 36}),
    "SmolLM3 activation": ("smollm3-3b-base.json", {"hidden_act": "no-such-act"}),
    "OLMo-3 one RoPE mapping": ("olmo-3-7b.json", {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}),
    "Seed-OSS output bias": ("seed-oss-36b-instruct.json", {"attention_out_bias": True}),
    "Seed-OSS activation": ("seed-oss-36b-instruct.json", {"hidden_act": "no-such-act"}),
    "EXAONE 4 no window, no layer_types": ("exaone-4.0-32b.json", {"layer_types": DEL, "sliding_window": None}),
    "EXAONE 4 pattern 0": ("exaone-4.0-32b.json", {"layer_types": DEL, "sliding_window_pattern": 0}),
    "EXAONE 4 activation": ("exaone-4.0-32b.json", {"hidden_act": "no-such-act"}),
    "ERNIE 4.5 activation": ("ernie-4.5-0.3b-pt.json", {"hidden_act": "no-such-act"}),
    "Ministral 3 without llama_4_scaling_beta": ("ministral-3-3b-instruct-2512.json",
                                                 {"text_config.rope_parameters.llama_4_scaling_beta": DEL}),
    "Ministral 3 without original context": ("ministral-3-3b-instruct-2512.json", {
        "text_config.rope_parameters.original_max_position_embeddings": DEL}),
    "Qwen3-VL attention_bias": ("qwen3-vl-8b-instruct.json", {"text_config.attention_bias": True}),
    "Qwen3-VL activation": ("qwen3-vl-8b-instruct.json", {"text_config.hidden_act": "no-such-act"}),
    # hf_recent_moe
    "GLM-4.5 activation": ("glm-4.5.json", {"hidden_act": "no-such-act"}),
    "dots1 without n_routed_experts": ("dots.llm1.inst.json", {"n_routed_experts": DEL}),
    "dots1 without num_experts_per_tok": ("dots.llm1.inst.json", {"num_experts_per_tok": DEL}),
    "dots1 attention_bias": ("dots.llm1.inst.json", {"attention_bias": True}),
    "dots1 activation": ("dots.llm1.inst.json", {"hidden_act": "no-such-act"}),
    "ERNIE-MoE use_bias": ("ernie-4.5-21b-a3b-pt.json", {"use_bias": True}),
    "ERNIE-MoE MoE ends early": ("ernie-4.5-21b-a3b-pt.json", {"moe_layer_end_index": 10}),
    "ERNIE-MoE moe_norm_min": ("ernie-4.5-21b-a3b-pt.json", {"moe_norm_min": 0.1}),
    "ERNIE-MoE activation": ("ernie-4.5-21b-a3b-pt.json", {"hidden_act": "no-such-act"}),
    "Qwen3-VL-MoE attention_bias": ("qwen3-vl-30b-a3b-instruct.json", {"text_config.attention_bias": True}),
    "Qwen3-VL-MoE activation": ("qwen3-vl-30b-a3b-instruct.json", {"text_config.hidden_act": "no-such-act"}),
    # hf_ssm
    "Bamba GELU conv": ("bamba", {"hidden_act": "gelu"}),
    "Bamba unknown activation": ("bamba", {"hidden_act": "no-such-act"}),
    "Bamba time_step_limit one number": ("bamba", {"time_step_limit": [0.0]}),
    "Bamba time_step_limit reversed": ("bamba", {"time_step_limit": [1.0, 0.5]}),
    "Bamba heads that miss the inner width": ("bamba", {"mamba_n_heads": 100}),
    "Bamba attention_bias without mlp_bias": ("bamba", {"attention_bias": True}),
    "Bamba partial_rotary_factor": ("bamba", {"partial_rotary_factor": 0.25}),
    "Bamba attn_layer_indices past the last": ("bamba", {"attn_layer_indices": [99]}),
    "Nemotron-H layers_block_type": ("nemotron-h-8b.json", {"layers_block_type": ["mamba", "ssm"]}),
    "Nemotron-H pattern letter": ("nemotron-h-8b.json", {"hybrid_override_pattern": "M*X"}),
    "Nemotron-H GELU conv": ("nemotron-h-8b.json", {"mamba_hidden_act": "gelu"}),
    "Nemotron-H latent experts": ("nemotron-3-nano-30b-a3b.json", {"moe_latent_size": 1024}),
    "Nemotron-H MTP layers": ("nemotron-h-8b.json", {"num_nextn_predict_layers": 1}),
    "Nemotron-H attention_dropout": ("nemotron-h-8b.json", {"attention_dropout": 0.1}),
    "Nemotron-H hidden_dropout": ("nemotron-h-8b.json", {"hidden_dropout": 0.1}),
    "Nemotron-H mlp_bias alone": ("nemotron-h-8b.json", {"mlp_bias": True}),
    "Nemotron-H attention_head_dim": ("nemotron-h-8b.json", {"attention_head_dim": 64}),
    "Nemotron-H MLP activation": ("nemotron-h-8b.json", {"mlp_hidden_act": "silu"}),
    "Granite LayerNorm": ("granite-4.0-h-small.json", {"normalization_function": "layernorm"}),
    "Granite ALiBi": ("granite-4.0-h-small.json", {"position_embedding_type": "alibi"}),
    "Granite layer_types": ("granite-4.0-h-small.json", {"layer_types": ["mamba", "ssm"]}),
    "Granite activation": ("granite-4.0-h-small.json", {"hidden_act": "no-such-act"}),
    "Granite attention bias": ("granite-4.0-h-small.json", {"attention_bias": True}),
    "Falcon-H1 input scale with biases": ("falcon_h1", {"attention_bias": True, "mlp_bias": True,
                                                        "attention_in_multiplier": 2.0}),
    "Falcon-H1 projector biases": ("falcon_h1", {"projectors_bias": True}),
    "Falcon-H1 activation": ("falcon_h1", {"hidden_act": "no-such-act"}),
    "Jamba sliding window": ("jamba-v0.1.json", {"sliding_window": 4096}),
    "Jamba activation": ("jamba-v0.1.json", {"hidden_act": "no-such-act"}),
}


def _case(label: str) -> Any:
    base, changes = CASES[label]
    return [_file(base)] if label == "config.json is a list" else _built(base, changes)


@pytest.mark.parametrize("label", CASES)
def test_each_refusal_site_reads_as_reviewed(label: str) -> None:
    problems = _problems(_case(label))
    assert problems, f"{label}: imported, not refused"
    _check(f"case: {label}", problems)


def _sites() -> set[tuple[str, int]]:
    """(file, line) of every r.bad, r.expect and r.act call in the readers (hf_reader's own, inside expect and
    act, are theirs)."""
    sites = set()
    for path in Path(hf_reader.__file__).parent.glob("hf_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("bad", "expect", "act") and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "r"):
                sites.add((path.name, node.lineno))
    return sites


@pytest.mark.skipif("MUTANT_UNDER_TEST" in os.environ, reason="mutmut's copies of the readers hold every mutant's "
                                                              "sites too; this checks the cases, not the engine")
def test_the_cases_reach_every_refusal_site(monkeypatch: pytest.MonkeyPatch) -> None:
    reached: set[tuple[str, int]] = set()
    bad, inner = hf_reader._Reader.bad, {hf_reader._Reader.expect.__code__, hf_reader._Reader.act.__code__}

    def recording(self: hf_reader._Reader, key: str, value: Any, why: str) -> None:
        frame = sys._getframe(1)
        while frame.f_code in inner:   # an r.expect or r.act refusal: the site is their caller
            frame = frame.f_back
        reached.add((Path(frame.f_code.co_filename).name, frame.f_lineno))
        bad(self, key, value, why)

    monkeypatch.setattr(hf_reader._Reader, "bad", recording)
    for label in CASES:
        _problems(_case(label))
    missed = sorted(_sites() - reached)
    assert not missed, f"{len(missed)} refusal sites no case reaches: {missed}"
