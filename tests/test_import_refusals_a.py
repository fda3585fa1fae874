"""import-hf and export-hf, message by message and number by number, for the DeepSeek-style, Kimi, MiniMax and
Llama 4 readers and writers: each refusal names the key the user wrote, its value and why; each key listed as
ignored says why in full; the name, the layer kinds, the checkpoint format and the exported ids are the model's."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.interop import from_hf_config, read_checkpoint
from engine.interop.hf_config import import_hf
from engine.interop.hf_export import hf_problems
from engine.interop.hf_keys import in_file_terms
from tests.import_typos import DATA, published, refusal



def _text(name: str, **changes: Any) -> dict[str, Any]:
    """A multimodal file with its text_config changed."""
    d = published(name)
    return {**d, "text_config": {**d["text_config"], **changes}}


# --- the imported name -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("path,name", [
    ("/home/me/checkpoints/My Llama 8B/", "My Llama 8B"),   # a local folder with spaces, a trailing slash
    ("meta-llama/Llama-3.1-8B/", "Llama-3.1-8B"),
])
def test_the_imported_name_is_the_last_folder_of_name_or_path(path: str, name: str) -> None:
    """The config is named after the model's folder, spaces and all, whatever slashes surround it."""
    assert import_hf({**published("llama3_1_8b.json"), "_name_or_path": path}).config.name == name


# --- refusals read in the file's terms ----------------------------------------------------------------------------

@pytest.mark.parametrize("d,problems", [
    # a RoPE value ModelConfig refuses is reported at the mapping key that holds it, in either spelling
    ({**published("llama3_1_8b.json"), "rope_scaling": {**published("llama3_1_8b.json")["rope_scaling"], "factor": -1.0}},
     ["rope_scaling.factor: -1.0 is not a number > 0 (rope_factor)"]),
    (_text("ministral-3-3b-instruct-2512.json",
           rope_parameters={**published("ministral-3-3b-instruct-2512.json")["text_config"]["rope_parameters"],
                            "factor": -1.0}),
     ["text_config.rope_parameters.factor: -1.0 is not a number > 0 (rope_factor)"]),
    # a list the file holds is traced to its key like a number (JSON's list is our tuple)
    ({**published("phi-3_5.json"), "rope_scaling": {**published("phi-3_5.json")["rope_scaling"],
                                                "short_factor": published("phi-3_5.json")["rope_scaling"]["short_factor"]
                                                [:-1]}},
     ["rope_scaling.short_factor: longrope needs rotary_dim/2 = 48 numbers, got 47 numbers (rope_short_factor)"]),
    ({**published("deepseek-v3.2.json"), "rope_interleave": False},
     ["rope_interleave: False is not expressible (transformers' sparse-attention MLA always rotates adjacent pairs)"]),
    ({**published("kimi-linear-48b-a3b.json"), "linear_attn_config": [1]},
     ["linear_attn_config: [1] is not expressible (a mapping)"]),
    ({**published("kimi-linear-48b-a3b.json"),
      "linear_attn_config": {**published("kimi-linear-48b-a3b.json")["linear_attn_config"], "gate_low_rank_dim": 16}},
     ["linear_attn_config.gate_low_rank_dim: 16 is not expressible (not read by transformers' Kimi Linear; "
      "refusing to guess)"]),
    ({**published("minimax-text-01.json"),
      **dict.fromkeys(("full_attn_alpha_factor", "linear_attn_alpha_factor", "mlp_alpha_factor"), 0.0)},
     ["full_attn_alpha_factor: 0.0 is not expressible (a residual scale above 0)"]),
    # any jitter, a whole 1 included, is training-time noise we do not model
    (_text("llama-4-scout-17b-16e.json", router_jitter_noise=1),
     ["text_config.router_jitter_noise: 1 is not expressible (training-time input jitter of the router is not "
      "modelled)"]),
    # a layer_types list one layer short, every entry valid
    (_text("llama-4-scout-17b-16e.json", layer_types=["full_attention"] * 47),
     [f"text_config.layer_types: {['full_attention'] * 47!r} is not expressible (48 entries of chunked_attention / "
      "full_attention (chunks need attention_chunk_size))"]),
])
def test_each_refusal_names_the_file_s_key_value_and_why(d: dict[str, Any], problems: list[str]) -> None:
    assert refusal(d) == problems


def test_deepseek_v4_names_each_part_with_the_value_transformers_would_build() -> None:
    """A bare deepseek_v4 file: each part is refused at its key with transformers' default value, or says that it
    is transformers' default where that default is a per-layer list."""
    assert refusal({"model_type": "deepseek_v4"}) == [
        "hc_mult: 4 is not expressible (manifold-constrained hyper-connections: hc_mult residual streams mixed by "
        "Sinkhorn-normalised matrices around every block; our blocks keep one residual stream)",
        "layer_types: \"transformers' default\" is not expressible (compressed sparse / heavily compressed "
        "attention: a learned compressor of the keys (rate 4 or 128) before the indexer, and a sliding window "
        "beside it)",
        "mlp_layer_types: \"transformers' default\" is not expressible (hash-routed MoE layers (experts picked by a "
        "fixed table of token ids))",
        "o_groups: 8 is not expressible (a grouped low-rank output projection (o_groups groups through o_lora_rank))",
        "scoring_func: 'sqrtsoftplus' is not expressible (router scores sqrt(softplus(logits)); ours are softmax or "
        "sigmoid)"]


# --- keys listed as ignored ----------------------------------------------------------------------------------------

def test_kimi_k2_says_it_is_read_as_deepseek_v3() -> None:
    assert import_hf(published("kimi-k2.json")).ignored == [
        "model_type: kimi_k2 is DeepSeek-V3 under another name (its remote code is DeepseekV3ForCausalLM); read as "
        "deepseek_v3, as transformers' Kimi-K2.5 reads its kimi_k2 text config"]


def test_glm5_lists_the_mtp_indexer_sharing_as_not_built() -> None:
    got = import_hf({**published("glm-5.json"), "index_share_for_mtp_iteration": True})
    assert got.ignored == ["index_share_for_mtp_iteration: how the multi-token-prediction module reuses the indexer, "
                           "which is not built"]


# --- what is imported -----------------------------------------------------------------------------------------------

def test_minimax_s_window_reaches_every_softmax_attention_layer() -> None:
    """With sliding_window set, MiniMax's softmax-attention layers are sliding ones (as in transformers), the rest
    lightning."""
    d = published("minimax-text-01.json")
    kinds = import_hf({**d, "sliding_window": 4096}).config.layer_types
    assert kinds == tuple("sliding" if t == "full_attention" else "lightning" for t in d["layer_types"])


def test_a_compressed_tensors_fp8_block_checkpoint_is_sized_by_its_block() -> None:
    """compressed-tensors' block fp8 (8-bit float weights in 128 x 128 blocks) is the fp8_block format."""
    weights = {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}
    q = {"quant_method": "compressed-tensors", "format": "float-quantized",
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}
    c = import_hf({**published("llama3_1_8b.json"), "quantization_config": q}).config
    assert (c.ckpt_format, c.ckpt_group_size) == ("fp8_block", 128)


def test_a_config_file_with_infinity_reads_as_json_does(tmp_path: Path) -> None:
    """A published config.json may hold Infinity (NVIDIA-Nemotron-Nano-9B-v2 does): read, as a file or a folder;
    a config file alone reads no weights and says so."""
    text = (DATA / "nvidia-nemotron-nano-9b-v2.json").read_text()
    assert "Infinity" in text
    want = json.loads(text)
    file = tmp_path / "nemotron.json"
    file.write_text(text)
    assert read_checkpoint(file, weights=False) == (want, None, "not read")
    assert read_checkpoint(file) == (want, None, "random init (a config file, no weights)")
    (tmp_path / "config.json").write_text(text)
    assert read_checkpoint(tmp_path, weights=False) == (want, None, "not read")


# --- export ---------------------------------------------------------------------------------------------------------

def test_deepseek_v2_refuses_multi_token_prediction() -> None:
    """DeepSeek-V2 has no MTP modules (DeepSeek-V3 has): a config with them is refused by name."""
    cfg = from_hf_config({**published("deepseek-v3.json"), "num_nextn_predict_layers": 1})
    assert cfg.mtp_depth == 1
    assert "mtp_depth: 1 is not expressible in deepseek_v2 (no multi-token-prediction modules)" in \
        hf_problems(cfg, "deepseek_v2")[1]
    assert not [p for p in hf_problems(cfg, "deepseek_v3")[1] if p.startswith("mtp_depth")]


def test_kimi_linear_exports_transformers_pad_id_only_where_the_vocabulary_has_it() -> None:
    """Kimi-Linear-48B's 163,840-row vocabulary keeps its published pad_token_id 163839; a small vocabulary gets
    none (transformers' default 163839 would index past its embedding)."""
    out, problems = hf_problems(from_hf_config(published("kimi-linear-48b-a3b.json")), "kimi_linear")
    assert problems == [] and out["pad_token_id"] == published("kimi-linear-48b-a3b.json")["pad_token_id"] == 163839
    small = from_hf_config(published("kimi-linear-48b-a3b.json")).replace(vocab_size=1000)
    out, problems = hf_problems(small, "kimi_linear")
    assert problems == [] and out["pad_token_id"] is None


def test_a_problem_naming_no_field_of_ours_is_the_whole_file_s() -> None:
    """A ModelConfig problem that names none of our fields (an unknown key) is reported against config.json, as
    it reads, not dropped."""
    assert in_file_terms(["unknown key `wobble`"], {}, {}) == ["config.json: unknown key `wobble`"]


def test_a_problem_at_a_key_names_our_field_unless_the_key_is_that_name() -> None:
    """The message is at the file's key (a nested path too: the text_config. prefix and the quantization
    mapping's bits), with our field's name added only when the key is not already it; no path of field_keys
    ends in its own field's name, so a nested key always adds it."""
    from engine.config import FIELDS
    from engine.interop.hf_keys import field_keys
    d = {"head_dim": 0, "quantization_config": {"bits": 5}}
    got = in_file_terms(["head_dim: 0 is too small", "ckpt_bits: 5 is not one of 2, 3, 4, 8"],
                        {"head_dim": 0, "ckpt_bits": 5}, d, "text_config.")
    assert got == ["text_config.head_dim: 0 is too small",
                   "text_config.quantization_config.bits: 5 is not one of 2, 3, 4, 8 (ckpt_bits)"]
    assert [(f, k) for f in FIELDS for k in field_keys(f) if "." in k and k.rsplit(".", 1)[-1] == f] == []
