"""Each quantization_config a published checkpoint carries, read whole: the checkpoint fields import-hf stores
(ckpt_format, ckpt_bits, ckpt_group_size, ckpt_double_quant, ckpt_keep), which `plan --quant checkpoint` sizes
the files by. Keys as the quantizers write them: AutoAWQ's quant_config (w_bit, q_group_size, version "GEMM"),
transformers' AwqConfig / GPTQConfig (bits, group_size), BitsAndBytesConfig (its fp4 default), llm-compressor's
compressed-tensors (config_groups, ignore), DeepSeek's and Qwen's fp8 (weight_block_size, modules_to_not_convert),
gpt-oss's mxfp4."""
from __future__ import annotations

from typing import Any

import pytest

from engine.interop.hf_config import import_hf

from tests.import_typos import published, refusal

_FIELDS = ("ckpt_format", "ckpt_bits", "ckpt_group_size", "ckpt_double_quant", "ckpt_keep")
_NVFP4 = {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "group_size": 16}}}
_FP8_BLOCK = {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
                                                             "block_structure": [128, 128]}}}
_DEFAULT = ("router", "embeddings", "head")

CASES: dict[str, tuple[dict[str, Any], tuple]] = {
    # AutoAWQ's own keys (casperhansen/llama-3-8b-instruct-awq): w_bit, q_group_size, version in capitals
    "autoawq": ({"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "zero_point": True, "version": "GEMM"},
                ("awq", 4, 64, False, None)),
    "autoawq gemv": ({"quant_method": "awq", "w_bit": 4, "q_group_size": 128, "version": "GEMV"},
                     ("awq", 4, 128, False, None)),
    "awq gemv lower": ({"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemv"},
                       ("awq", 4, 32, False, None)),
    "autoawq 8 bit": ({"quant_method": "awq", "w_bit": 8, "q_group_size": 128, "version": "gemm"},
                      ("awq", 8, 128, False, None)),
    # AwqConfig's defaults: 4 bits, groups of 128, gemm
    "awq defaults": ({"quant_method": "awq"}, ("awq", 4, 128, False, None)),
    "awq bits win over w_bit": ({"quant_method": "awq", "bits": 8, "w_bit": 4, "group_size": 64, "q_group_size": 32},
                                ("awq", 8, 64, False, None)),
    "gptq 8 bit": ({"quant_method": "gptq", "bits": 8, "group_size": 32, "desc_act": False},
                   ("gptq", 8, 32, False, None)),
    "gptq default group": ({"quant_method": "gptq", "bits": 3}, ("gptq", 3, 128, False, None)),
    "gptq attention kept": ({"quant_method": "gptq", "bits": 4, "group_size": 128,
                             "modules_to_not_convert": ["model.layers.*.self_attn"]},
                            ("gptq", 4, 128, False, (*_DEFAULT, "attention"))),
    "bnb nf4 double quant": ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                              "bnb_4bit_use_double_quant": True}, ("bnb_nf4", None, None, True, None)),
    "bnb fp4 by default": ({"quant_method": "bitsandbytes", "load_in_4bit": True}, ("bnb_fp4", None, None, False, None)),
    "bnb int8 head kept": ({"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_skip_modules": ["lm_head"]},
                           ("bnb_int8", None, None, False, None)),
    "bnb int8 mlp kept": ({"quant_method": "bitsandbytes", "load_in_8bit": True, "load_in_4bit": False,
                           "llm_int8_skip_modules": ["lm_head", "model.layers.*.mlp"]},
                          ("bnb_int8", None, None, False, (*_DEFAULT, "dense_ffn"))),
    # DeepSeek-V3's and Qwen3-FP8's release config
    "fp8 block": ({"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                   "weight_block_size": [128, 128]}, ("fp8_block", None, 128, False, None)),
    "fp8 block 64, attention kept": ({"quant_method": "fp8", "weight_block_size": [64, 64],
                                      "modules_to_not_convert": ["lm_head", "model.layers.*.self_attn"]},
                                     ("fp8_block", None, 64, False, (*_DEFAULT, "attention"))),
    # every part the format keeps anyway, named: nothing more is kept
    "fp8 the default parts named": ({"quant_method": "fp8", "weight_block_size": [128, 128],
                                     "modules_to_not_convert": ["lm_head", "model.embed_tokens",
                                                                "model.layers.*.mlp.gate"]},
                                    ("fp8_block", None, 128, False, None)),
    "nvfp4": ({"quant_method": "compressed-tensors", "config_groups": _NVFP4, "ignore": ["lm_head"]},
              ("nvfp4", None, None, False, None)),
    "nvfp4 experts kept": ({"quant_method": "compressed-tensors", "config_groups": _NVFP4,
                            "ignore": ["lm_head", "re:.*mlp.experts.*$"]},
                           ("nvfp4", None, None, False, (*_DEFAULT, "experts"))),
    "compressed fp8 block": ({"quant_method": "compressed-tensors", "config_groups": _FP8_BLOCK},
                             ("fp8_block", None, 128, False, None)),
    "mxfp4": ({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                   "model.embed_tokens", "lm_head"]},
              ("mxfp4", None, None, False, None)),
}


@pytest.mark.parametrize("label", sorted(CASES))
def test_each_published_quantization_config_gives_its_checkpoint_fields(label: str) -> None:
    q, want = CASES[label]
    cfg = import_hf({**published("llama3_1_8b.json"), "quantization_config": q}).config
    assert tuple(getattr(cfg, f) for f in _FIELDS) == want


@pytest.mark.parametrize("version", ["gemm", "GEMM", "gemv", "GEMV", None])
def test_autoawqs_gemm_and_gemv_layouts_are_read_in_either_case(version) -> None:
    """AutoAWQ writes "GEMM" / "GEMV"; transformers' AwqConfig lower-cases them: both read, no problem."""
    q = {"quant_method": "awq", "bits": 4, "group_size": 128}
    if version is not None:
        q["version"] = version
    cfg = import_hf({**published("llama3_1_8b.json"), "quantization_config": q}).config
    assert (cfg.ckpt_format, cfg.ckpt_bits, cfg.ckpt_group_size) == ("awq", 4, 128)


@pytest.mark.parametrize("version", ["exllama", "ipex", "GEMM_FUSED"])
def test_other_awq_layouts_are_refused_at_version(version: str) -> None:
    q = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": version}
    problems = refusal({**published("llama3_1_8b.json"), "quantization_config": q})
    assert [p.split(":")[0] for p in problems] == ["quantization_config.version"]


@pytest.mark.parametrize("method", ["awq", "gptq"])
def test_the_smallest_group_is_one_weight_and_none_or_per_row_is_refused(method: str) -> None:
    """group_size 1 (a scale per weight) is a positive group and is sized; 0 and GPTQ's -1 (one group per row,
    which these fields cannot say) are refused at group_size."""
    q = {"quant_method": method, "bits": 4}
    cfg = import_hf({**published("llama3_1_8b.json"), "quantization_config": {**q, "group_size": 1}}).config
    assert (cfg.ckpt_format, cfg.ckpt_group_size) == (method, 1)
    for group in (0, -1):
        problems = refusal({**published("llama3_1_8b.json"), "quantization_config": {**q, "group_size": group}})
        assert [p.split(":")[0] for p in problems] == ["quantization_config.group_size"]
