"""Checkpoints as shipped (engine/checkpoint.py, `import-hf` + `plan --quant checkpoint`) against what is published.

gpt-oss: model.safetensors.index.json metadata.total_size of openai/gpt-oss-120b, 65,248,815,744 B, and of
openai/gpt-oss-20b, 13,761,264,768 B (both as public repositories quote the Hub files). DeepSeek-V3: its
repository's weight files (deepseek-ai/DeepSeek-V3, revision afb92e1, and the same figure for the
deepseek-v3.1:671b Ollama listing) hold 688,586,727,753 B, safetensors headers included.
bitsandbytes: held against bitsandbytes' own serialized state dict (Linear4bit, Linear8bitLt), and LLM.int8 against
a published index (a Llama-3.1-8B-Instruct fine-tune pushed in int8, SOURCES.md). AWQ / GPTQ: the buffers AutoAWQ's
WQLinear_GEMM (awq/modules/linear/gemm.py) and AutoGPTQ's QuantLinear declare: qweight int32 [in, out*b/32] (GPTQ
[in*b/32, out]), qzeros int32 [in/G, out*b/32], scales fp16 [in/G, out], GPTQ's g_idx int32 [in]; and GPTQ against
TheBloke/MythoMax-L2-13B-GPTQ's published files, four branches (bits 4 and 8, groups 128, 64, 32).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.checkpoint import shipped_bytes
from engine.cli import main
from engine.config import ConfigError
from engine.interop.hf_config import import_hf_config
from engine.plan.quant import checkpoint_bytes
from engine.presets import get_preset

DATA = Path(__file__).parent / "data" / "hf_configs"
LLAMA = json.loads((DATA / "llama3_1_8b.json").read_text())


def _plan_weights(capsys, tmp_path, config: str, quant: str = "checkpoint") -> dict:
    yaml_path = tmp_path / "model.yaml"
    assert main(["import-hf", str(DATA / config)]) == 0
    yaml_path.write_text(capsys.readouterr().out)
    assert main(["plan", "--config", str(yaml_path), "--mode", "infer", "--quant", quant, "--seq", "1",
                 "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_gpt_oss_120b_is_its_published_checkpoint(capsys, tmp_path):
    out = _plan_weights(capsys, tmp_path, "gpt-oss-120b.json")
    assert out["per_gpu"]["weights_bytes"] == 65_248_815_744          # the acceptance asks within 0.1%
    assert out["weights_by_storage"] == {"mxfp4": 60_914_073_600, "bf16": 4_334_742_144}


def test_gpt_oss_20b_preset_is_its_published_checkpoint():
    assert checkpoint_bytes(get_preset("gpt-oss-20b").config) == (13_761_264_768, 0)


def test_deepseek_v3_fp8_with_its_mtp_module_is_its_published_files():
    cfg, _ = import_hf_config(json.loads((DATA / "deepseek-v3.json").read_text()))
    assert (cfg.ckpt_format, cfg.ckpt_group_size) == ("fp8_block", 128)
    model, mtp = checkpoint_bytes(cfg)
    assert abs((model + mtp) / 688_586_727_753 - 1) < 0.001
    assert 0 < 688_586_727_753 - (model + mtp) < 20e6                   # what is left: ~160 safetensors headers
    assert checkpoint_bytes(get_preset("deepseek-v3").config) == (model, mtp)


def test_bitsandbytes_int8_is_its_published_index(capsys, tmp_path):
    """jeevanchaps/Meta-Llama3.1-8B-Instruct-assessment (LLM.int8, torch_dtype float16): its index's total_size,
    9,086,705,888 B == int8 weights + an fp32 SCB per output row + a 1-byte weight_format per Linear (224 of them),
    embeddings, lm_head and norms in fp16."""
    out = _plan_weights(capsys, tmp_path, "llama-3.1-8b-instruct-bnb-int8.json")
    assert out["per_gpu"]["weights_bytes"] == 9_086_705_888
    assert out["weights_by_storage"] == {"bnb_int8": 6_984_827_104, "bf16": 2_101_878_784}


MYTHOMAX = json.loads((DATA / "mythomax-l2-13b-gptq.json").read_text())


@pytest.mark.parametrize("branch, q, published", [
    ("main", {}, 7_259_435_192),
    ("gptq-4bit-64g-actorder_True", {"group_size": 64, "desc_act": True}, 7_507_243_192),
    ("gptq-4bit-32g-actorder_True", {"group_size": 32, "desc_act": True}, 8_002_859_672),
    ("gptq-8bit-128g-actorder_True", {"bits": 8, "desc_act": True}, 13_652_883_824),
])
def test_gptq_is_its_published_file(capsys, tmp_path, branch, q, published):
    """TheBloke/MythoMax-L2-13B-GPTQ: each branch's model.safetensors, its Git LFS size (the whole file).
    What we do not count is exactly known: AutoGPTQ before its PR #602 (2024-03) gave every QuantLinear an fp16
    bias [out] even where the layer has none (these files are of 2023-08), and the file's safetensors header (a JSON
    entry per tensor, about 112 B each)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**MYTHOMAX, "quantization_config": {**MYTHOMAX["quantization_config"], **q}}))
    ours = _plan_weights(capsys, tmp_path, str(path))["per_gpu"]["weights_bytes"]
    assert abs(ours / published - 1) < 0.001, branch                      # the acceptance: within 0.1%
    layers, d, ff = 40, 5120, 13824
    bias = 2 * layers * (4 * d + 2 * ff + d)                              # q k v o (MHA), gate up, down
    tensors = layers * (7 * 5 + 2) + 3             # 5 per QuantLinear, 2 norms per layer; embed, norm, head
    header = published - ours - bias
    assert 100 * tensors < header < 120 * tensors, branch


def _import_quant(q: dict):
    return import_hf_config({**LLAMA, "quantization_config": q})[0]


@pytest.mark.parametrize("q, want", [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
      "bnb_4bit_use_double_quant": True}, dict(ckpt_format="bnb_nf4", ckpt_double_quant=True)),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_skip_modules": ["lm_head"]},
     dict(ckpt_format="bnb_int8", ckpt_keep=None)),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"},
     dict(ckpt_format="awq", ckpt_bits=4, ckpt_group_size=128)),
    ({"quant_method": "gptq", "bits": 8, "group_size": 32, "desc_act": True, "sym": True},
     dict(ckpt_format="gptq", ckpt_bits=8, ckpt_group_size=32)),
    ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["lm_head"],
      "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}}},
     dict(ckpt_format="nvfp4")),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["model.layers.*.self_attn"]},
     dict(ckpt_format="awq", ckpt_keep=("router", "embeddings", "head", "attention"))),
])
def test_quantization_config_becomes_the_checkpoint_fields(q, want):
    cfg = _import_quant(q)
    assert {k: getattr(cfg, k) for k in want} == want


@pytest.mark.parametrize("q, named", [
    ({"quant_method": "hqq"}, "quantization_config.quant_method: 'hqq'"),
    ({"quant_method": "gptq", "bits": 4, "group_size": -1}, "quantization_config.group_size: -1"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["model.layers.3.mlp"]},
     "quantization_config.modules_to_not_convert: 'model.layers.3.mlp'"),
])
def test_what_cannot_be_sized_is_refused_by_name(q, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.").replace("*", r"\*")):
        _import_quant(q)


def test_an_int8_compressed_tensors_checkpoint_is_refused_saying_what_is_read():
    """compressed-tensors' W8A8 int8 (channel-wise int weights, as RedHatAI's quantized Llamas ship) has no sizing
    here: the message names the group it got and the two layouts that are read."""
    weights = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}
    q = {"quant_method": "compressed-tensors", "format": "int-quantized",
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}
    with pytest.raises(ConfigError) as e:
        _import_quant(q)
    assert (f"quantization_config.config_groups: {weights!r} is not expressible (one group of NVFP4 (4-bit float, "
            "groups of 16) or block fp8 is read)") in str(e.value)


def test_awq_and_gptq_are_the_buffers_their_kernels_declare():
    cfg = get_preset("llama-3-8b").config
    for fmt, bits, g in (("awq", 4, 128), ("gptq", 4, 128), ("gptq", 8, 32)):
        c = cfg.replace(ckpt_format=fmt, ckpt_bits=bits, ckpt_group_size=g)
        rows, cols = 14336, 4096                                  # gate_proj: out x in
        qweight = cols * (rows * bits // 32) * 4                   # int32 (GPTQ: [in*b/32, out], the same bytes)
        qzeros = (cols // g) * (rows * bits // 32) * 4
        scales = (cols // g) * rows * 2
        g_idx = cols * 4 if fmt == "gptq" else 0
        assert shipped_bytes(c, "gate", "blocks.0.ffn.gate.weight", (rows, cols)) == (qweight + qzeros + scales + g_idx,
                                                                                       fmt)
        assert shipped_bytes(c, "head", "head.weight", (128256, 4096)) == (128256 * 4096 * 2, "bf16")  # lm_head kept


def test_bitsandbytes_is_its_own_serialized_state_dict():
    bnb = pytest.importorskip("bitsandbytes")
    import torch
    torch.manual_seed(0)
    cfg = get_preset("llama-3-8b").config
    for rows, cols in ((128, 256), (1024, 4096), (96, 200)):
        for double in (False, True):
            w = bnb.nn.Params4bit(torch.randn(rows, cols, dtype=torch.bfloat16), requires_grad=False,
                                  quant_type="nf4", compress_statistics=double)._quantize("cpu")
            lin = bnb.nn.Linear4bit(cols, rows, bias=False, quant_type="nf4", compress_statistics=double)
            lin.weight = w
            real = sum(v.numel() * v.element_size() for v in lin.state_dict().values())
            c = cfg.replace(ckpt_format="bnb_nf4", ckpt_double_quant=double)
            ours, _ = shipped_bytes(c, "q", "blocks.0.attn.q_proj.weight", (rows, cols))
            assert abs(ours - real) <= 4, (rows, cols, double)  # the JSON quant_state prints a float's digits
        l8 = bnb.nn.Linear8bitLt(cols, rows, bias=False, has_fp16_weights=False)
        l8.weight = bnb.nn.Int8Params(torch.randn(rows, cols, dtype=torch.float16), requires_grad=False,
                                      has_fp16_weights=False)
        l8 = l8.to("cpu")
        real = sum(v.numel() * v.element_size() for v in l8.state_dict().values())
        assert shipped_bytes(cfg.replace(ckpt_format="bnb_int8"), "q", "x", (rows, cols)) == (real, "bnb_int8")


def test_mxfp4_and_fp8_blocks_count_their_scales():
    cfg = get_preset("gpt-oss-20b").config
    E, f, d = 32, 2880, 2880
    assert shipped_bytes(cfg, "expert_gate", "blocks.0.ffn.experts.gate", (E, f, d)) == \
        (E * f * d // 2 + E * f * math.ceil(d / 32), "mxfp4")
    assert shipped_bytes(cfg, "q", "blocks.0.attn.q_proj.weight", (4096, 2880)) == (4096 * 2880 * 2, "bf16")
    ds = get_preset("deepseek-v3").config
    assert shipped_bytes(ds, "kv_a", "blocks.0.attn.kv_a.weight", (576, 7168)) == \
        (576 * 7168 + 4 * math.ceil(576 / 128) * (7168 // 128), "fp8_block")


def test_a_shipped_model_names_its_format_in_the_plan():
    from engine.plan import Layout, Setup, plan
    cfg = get_preset("gpt-oss-20b").config
    p = plan(cfg, "rtx-4090-24gb", Layout(), Setup(mode="infer", seq=4096))
    assert any("ships in mxfp4" in n and "'checkpoint'" in n for n in p.notes)
    shipped = plan(cfg, "rtx-4090-24gb", Layout(), Setup(mode="infer", seq=4096, quant="checkpoint"))
    assert shipped.per_gpu["weights"] == 13_761_264_768 and shipped.fits
    assert not plan(cfg, "rtx-4090-24gb", Layout(), Setup(mode="infer", seq=4096)).fits   # bf16: 39 GiB
