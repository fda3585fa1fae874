"""GGUF storage (engine/plan/ggml.py, gguf.py) against llama.cpp's own sources.

Block sizes: the static_asserts of ggml/src/ggml-common.h, written here as the header writes them (an independent
expression per type, not the field list the module sums) and the bits per weight its comments state.
File types: the sizes llama.cpp publishes for meta-llama/Llama-3.1-8B in tools/quantize/README.md ("bits/weight"
and "size (GiB)" columns, llama-bench's model size over 8,030,261,248 parameters), each within 0.5%.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.plan import Layout, Setup, plan
from engine.plan.ggml import TYPES, row_bytes, tensor_bytes
from engine.plan.gguf import FILE_TYPES, file_types, needs_imatrix
from engine.plan.quant import gguf_types
from engine.plan.tensors import param_tensors
from engine.presets import get_preset

LLAMA31 = get_preset("llama-3.1-8b").config
HALF, QK_K, K_SCALE_SIZE = 2, 256, 12

# ggml-common.h: sizeof(block_x) == ..., and the "Effectively N bits per weight" / "N bpw" comments
HEADER = {
    "Q4_0": (32, HALF + 32 // 2), "Q4_1": (32, 2 * HALF + 32 // 2), "Q5_0": (32, HALF + 4 + 32 // 2),
    "Q5_1": (32, 2 * HALF + 4 + 32 // 2), "Q8_0": (32, HALF + 32), "MXFP4": (32, 1 + 32 // 2),
    "NVFP4": (64, 64 // 16 + 64 // 2), "TQ1_0": (QK_K, HALF + QK_K // 64 + (QK_K - 4 * QK_K // 64) // 5),
    "TQ2_0": (QK_K, HALF + QK_K // 4), "Q2_K": (QK_K, 2 * HALF + QK_K // 16 + QK_K // 4),
    "Q3_K": (QK_K, HALF + QK_K // 4 + QK_K // 8 + 12), "Q4_K": (QK_K, 2 * HALF + K_SCALE_SIZE + QK_K // 2),
    "Q5_K": (QK_K, 2 * HALF + K_SCALE_SIZE + QK_K // 2 + QK_K // 8), "Q6_K": (QK_K, HALF + QK_K // 16 + 3 * QK_K // 4),
    "IQ2_XXS": (QK_K, HALF + QK_K // 8 * 2), "IQ2_XS": (QK_K, HALF + QK_K // 8 * 2 + QK_K // 32),
    "IQ2_S": (QK_K, HALF + QK_K // 4 + QK_K // 16), "IQ3_XXS": (QK_K, HALF + 3 * (QK_K // 8)),
    "IQ3_S": (QK_K, HALF + 13 * (QK_K // 32) + QK_K // 64), "IQ1_S": (QK_K, HALF + QK_K // 8 + QK_K // 16),
    "IQ1_M": (QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32), "IQ4_NL": (32, HALF + 32 // 2),
    "IQ4_XS": (QK_K, HALF + 2 + QK_K // 64 + QK_K // 2),
}
COMMENT_BPW = {"Q2_K": 2.625, "Q3_K": 3.4375, "Q4_K": 4.5, "Q5_K": 5.5, "Q6_K": 6.5625, "IQ2_XXS": 2.0625,
               "IQ2_XS": 2.3125, "IQ2_S": 2.5625, "IQ3_XXS": 3.0625, "IQ3_S": 3.4375, "IQ1_S": 1.5625,
               "IQ1_M": 1.75, "TQ1_0": 1.6875, "TQ2_0": 2.0625}
# tools/quantize/README.md, meta-llama/Llama-3.1-8B: bits/weight and size (GiB) per file type (transcribed, with
# its source, in tests/data/llama_cpp_quantize_llama31_8b.json; bench/bench_serve.py prints the same table)
PUBLISHED = json.loads((Path(__file__).parent / "data" / "llama_cpp_quantize_llama31_8b.json").read_text())
README = {k: (v["bits_per_weight"], v["size_gib"]) for k, v in PUBLISHED["file_types"].items()}
PARAMS = PUBLISHED["params"]


@pytest.mark.parametrize("name", sorted(HEADER))
def test_block_bytes_are_the_headers_static_asserts(name):
    elements, size = HEADER[name]
    assert (TYPES[name].elements, TYPES[name].block_bytes) == (elements, size)
    if name in COMMENT_BPW:
        assert TYPES[name].bits_per_weight == COMMENT_BPW[name]


def test_the_table_rows_build_the_types_they_name():
    """TYPES is written with engine/plan/ggml.py's `_t(name, values per block, *(field, bytes))`, run at import;
    called here it must build the same row (a mutation of it is otherwise invisible to a test run: the table
    exists before any test starts)."""
    from engine.plan.ggml import _t
    assert _t("Q8_0", 32, ("d", 2), ("qs", 32)) == TYPES["Q8_0"]
    assert _t("Q4_K", 256, ("d", 2), ("dmin", 2), ("scales", 12), ("qs", 128)) == TYPES["Q4_K"]


def test_rows_are_whole_blocks():
    assert row_bytes("Q4_K", 4096) == 16 * 144 and row_bytes("Q8_0", 4096) == 128 * 34
    assert tensor_bytes("Q6_K", (14336, 4096)) == 14336 * 16 * 210
    assert row_bytes("Q4_K", 300) == 2 * 144          # a shard's partial block rounds up


def _file_bytes(cfg, scheme: str) -> int:
    types = gguf_types(cfg, scheme)
    return sum(tensor_bytes(types[t.name], t.shape) for t in param_tensors(cfg))


@pytest.mark.parametrize("ftype", sorted(README))
def test_llama_3_1_8b_matches_llama_cpps_published_size(ftype):
    bpw, gib = README[ftype]
    got = _file_bytes(LLAMA31, f"gguf:{ftype}")
    assert abs(got / 2**30 / gib - 1) < 0.005                # the acceptance: within 0.5% of the GiB column
    assert abs(got * 8 / PARAMS - bpw) < 2e-4                 # in fact to the 4th decimal of bits per weight


def test_a_gated_deltanet_hybrid_matches_a_published_q4_k_m_file():
    """Qwen3-Next's architecture at Q4_K_M: steampunque/Qwen3-Coder-Next-Hybrid-GGUF's model card lists its plain
    Q4_K_M file (llama-quantize's defaults, "default embed and output") as 48.5e9 bytes, to one decimal (the
    preset has the same shapes). Within 0.5%: the card's rounding and the file's tokenizer metadata. The Gated
    DeltaNet projections are quantized as llama.cpp quantizes them (ssm_in, ssm_out, ...); priced as F32, they
    made this 52.9e9 (+9%)."""
    got = _file_bytes(get_preset("qwen3-next-80b-a3b").config, "gguf:Q4_K_M")
    assert abs(got / 48.5e9 - 1) < 0.005, got


def test_q4_k_m_mixture_is_llama_quants():
    """Q4_K_M: output Q6_K, attn_v and ffn_down Q6_K on the use_more_bits layers (first and last 4 of 32 and every
    third from layer 6), everything else Q4_K, norms F32."""
    types = file_types(LLAMA31, "Q4_K_M")
    more = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    for i in range(32):
        want = "Q6_K" if i in more else "Q4_K"
        assert types[f"blocks.{i}.attn.v_proj.weight"] == want == types[f"blocks.{i}.ffn.down.weight"]
        assert types[f"blocks.{i}.attn.q_proj.weight"] == "Q4_K" == types[f"blocks.{i}.ffn.gate.weight"]
        assert types[f"blocks.{i}.norm1.weight"] == "F32"
    assert types["head.weight"] == "Q6_K" and types["tok_emb.weight"] == "Q4_K"


def test_use_more_bits_divides_the_layer_count_as_c_does():
    """llama.cpp's use_more_bits is integer C arithmetic: 7 * n_layers / 8 on GPT-2's 12 layers is 10, so Q4_K_M
    gives Q6_K to layers 0, 3, 6, 9 (every third after the first eighth) and 10, 11 (the last 12 - 10 layers)."""
    types = file_types(get_preset("gpt2").config, "Q4_K_M")
    more = [0, 3, 6, 9, 10, 11]
    for i in range(12):
        want = "Q6_K" if i in more else "Q4_K"
        assert types[f"blocks.{i}.attn.v_proj.weight"] == want == types[f"blocks.{i}.ffn.down.weight"], i


# llama_tensor_get_type_impl, attn_output of a model with exactly 8 experts: these file types raise it to Q5_K
EIGHT_EXPERTS_Q5_K = ("Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S", "IQ3_M",
                      "IQ4_XS")


@pytest.mark.parametrize("ftype", EIGHT_EXPERTS_Q5_K)
def test_eight_expert_attention_output_takes_q5_k(ftype):
    """Mixtral (8 experts): every layer's attn_output is Q5_K under these file types, whatever their default."""
    types = file_types(get_preset("mixtral-8x7b").config, ftype)
    assert {types[f"blocks.{i}.attn.o_proj.weight"] for i in range(32)} == {"Q5_K"}


_IQ12_TYPES = ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M")


@pytest.mark.parametrize("ftype", _IQ12_TYPES)
def test_a_four_expert_model_keeps_attn_v_in_q4_k_under_the_lowest_bit_types(ftype):
    """llama_tensor_get_type for the IQ1/IQ2 file types: attn_v becomes Q4_K when n_gqa >= 4 or n_expert >= 4,
    else IQ3_S (IQ2_S, IQ2_M) or Q2_K. Qwen1.5-MoE-A2.7B's attention is MHA (n_gqa 1), so its expert count alone
    decides: 4 experts gives every layer's attn_v Q4_K, 3 experts the low type."""
    base = get_preset("qwen1.5-moe-a2.7b").config
    low = "IQ3_S" if ftype in ("IQ2_S", "IQ2_M") else "Q2_K"
    for experts, want in ((4, "Q4_K"), (3, low)):
        types = file_types(base.replace(n_experts=experts, experts_per_token=2), ftype, True)
        assert {types[f"blocks.{i}.attn.v_proj.weight"] for i in range(base.n_layers)} == {want}, experts


def test_a_row_the_blocks_do_not_divide_falls_back():
    """gpt-oss rows are 2,880 wide (not a multiple of 256): Q4_K falls back to Q5_0 (block 32); the output head,
    whose row 256 does not divide, takes Q8_0 as llama.cpp's output rule says."""
    cfg = get_preset("gpt-oss-20b").config
    types = file_types(cfg, "Q4_K_M")
    assert types["blocks.0.attn.q_proj.weight"] == "Q5_0" and types["head.weight"] == "Q8_0"
    assert types["blocks.0.ffn.experts.gate"] == "Q5_0" and types["blocks.0.ffn.router.weight"] == "F32"
    mx = file_types(cfg, "MXFP4_MOE")
    assert mx["blocks.0.ffn.experts.down"] == "MXFP4" and mx["blocks.0.attn.q_proj.weight"] == "Q8_0"


def test_a_stacked_expert_tensor_falls_back_by_its_row_not_its_expert_width():
    """gpt-oss with 1,000-wide experts: the stacked [experts, out, in] gate and up have rows of 2,880 (ggml's
    ne[0], the last dimension), which Q5_0's 32-blocks divide; down's rows are 1,000 wide, which no block
    divides, so it is stored F16: the file's size follows each tensor's own row width."""
    cfg = get_preset("gpt-oss-20b").config.replace(expert_d_ff=1000)
    types = file_types(cfg, "Q4_K_M")
    assert (types["blocks.0.ffn.experts.gate"], types["blocks.0.ffn.experts.up"]) == ("Q5_0", "Q5_0")
    assert types["blocks.0.ffn.experts.down"] == "F16"


def test_importance_matrix_default_follows_what_llama_quantize_requires():
    assert needs_imatrix(LLAMA31, "IQ2_M") and needs_imatrix(LLAMA31, "IQ3_XS") and needs_imatrix(LLAMA31, "Q2_K_S")
    assert not needs_imatrix(LLAMA31, "Q4_K_M") and not needs_imatrix(LLAMA31, "IQ4_XS")
    # with an importance matrix Q4_0 keeps the first eighth of ffn_down in Q4_1 (llama_tensor_get_type)
    assert _file_bytes(LLAMA31, "gguf:Q4_0+imatrix") - _file_bytes(LLAMA31, "gguf:Q4_0") == \
        4 * 4096 * 14336 // 32 * (20 - 18)


def test_every_file_type_prices_every_preset():
    for name in ("gpt2", "deepseek-v2-lite", "gemma-2-2b", "mixtral-8x7b"):
        cfg = get_preset(name).config
        for ftype in FILE_TYPES:
            types = file_types(cfg, ftype)
            assert set(types) == {t.name for t in param_tensors(cfg)}
            assert all(t in TYPES for t in types.values())


def test_plan_json_weights_match_the_readme(capsys):
    argv = ["plan", "--preset", "llama-3.1-8b", "--mode", "infer", "--quant", "gguf:Q4_K_M", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert abs(out["per_gpu"]["weights_bytes"] / 2**30 / 4.58 - 1) < 0.005
    ref = plan(LLAMA31, "h100-80gb", Layout(), Setup(mode="infer", quant="gguf:Q4_K_M", seq=LLAMA31.context_length))
    assert out["per_gpu"]["weights_bytes"] == ref.per_gpu["weights"]


# tools/quantize/quantize.cpp QUANT_OPTIONS describe file types the README table leaves out by their size on
# Llama-3-8B ("3.74G, +0.6569 ppl @ Llama-3-8B"; G = GiB, as its Q4_K_M "4.58G" is the README's 4.58 GiB)
QUANTIZE_OPTIONS = {"Q3_K_M": 3.74, "Q4_0": 4.34, "Q4_1": 4.78, "Q5_0": 5.21, "Q5_1": 5.65}


@pytest.mark.parametrize("ftype", sorted(QUANTIZE_OPTIONS))
def test_file_types_llama_quantize_describes_by_size(ftype):
    got = _file_bytes(get_preset("llama-3-8b").config, f"gguf:{ftype}")
    assert abs(got / 2**30 / QUANTIZE_OPTIONS[ftype] - 1) < 0.005
