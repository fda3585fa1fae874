"""import-hf, value by value, where a value only shows at some shapes: the name taken from a path whose last
letters are ones a careless strip would eat, the name a multimodal wrapper carries for its language model, the
checkpoint format of a bitsandbytes fp4 file (by its key and by BitsAndBytesConfig's default), a skip list
naming one layer in every quantization format (refused by name, not a crash), a Ministral 3 file without its
temperature beta (refused, not a crash), a GraniteMoeHybrid attention bias (which our `bias` cannot express),
and a weight codec misspelt in a family's pairs (named in both directions)."""
from __future__ import annotations

from typing import Any

import pytest

from engine.config import ModelConfig
from engine.interop import weights
from engine.interop.hf_config import import_hf
from engine.interop.hf_export import hf_problems
from engine.interop.pair import Pair

from tests.import_typos import published, refusal


# --- the name ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path,name", [
    ("mlx-community/Qwen3-4B-MLX", "Qwen3-4B-MLX"),        # a repo name ending in X: only the slashes go
    ("/models/Qwen3-4B-MLX//", "Qwen3-4B-MLX"),
    ("org/X", "X"),
])
def test_the_name_keeps_every_letter_of_the_last_folder(path: str, name: str) -> None:
    assert import_hf({**published("qwen3-4b-instruct-2507.json"), "_name_or_path": path}).config.name == name


@pytest.mark.parametrize("file,path,name", [
    ("gemma-3-4b-it.json", "google/gemma-3-4b-it", "gemma-3-4b-it"),
    ("qwen3-vl-4b-instruct.json", "Qwen/Qwen3-VL-4B-Instruct", "Qwen3-VL-4B-Instruct"),
])
def test_a_multimodal_file_names_its_language_model_after_the_checkpoint(file: str, path: str, name: str) -> None:
    """The top-level _name_or_path (save_pretrained writes it there, not in text_config) names the model, not
    the text family (gemma3_text)."""
    d = published(file)
    assert "_name_or_path" not in d["text_config"]
    assert import_hf({**d, "_name_or_path": path}).config.name == name


def test_a_text_configs_own_name_is_kept() -> None:
    d = published("gemma-3-4b-it.json")
    d = {**d, "_name_or_path": "google/gemma-3-4b-it", "text_config": {**d["text_config"], "_name_or_path": "lm"}}
    assert import_hf(d).config.name == "lm"


# --- quantization_config ------------------------------------------------------------------------------------------

def _quant(q: dict[str, Any]) -> ModelConfig:
    return import_hf({**published("llama3_1_8b.json"), "quantization_config": q}).config


def test_bitsandbytes_fp4_is_read_by_its_key_and_by_transformers_default() -> None:
    """bnb_4bit_quant_type "fp4" is bitsandbytes' other 4-bit format; left out it is fp4, as transformers'
    BitsAndBytesConfig reads it."""
    transformers = pytest.importorskip("transformers", minversion="5.0")
    assert transformers.BitsAndBytesConfig(load_in_4bit=True).bnb_4bit_quant_type == "fp4"
    q = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    for given in ({"bnb_4bit_quant_type": "fp4"}, {}):
        cfg = _quant({**q, **given})
        assert (cfg.ckpt_format, cfg.ckpt_double_quant, cfg.ckpt_keep) == ("bnb_fp4", False, None)
    assert _quant({**q, "bnb_4bit_quant_type": "nf4"}).ckpt_format == "bnb_nf4"


_ONE_LAYER = "model.layers.3.mlp"
_NVFP4 = {"group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}}
_FP8_BLOCK = {"group_0": {"weights": {"num_bits": 8, "type": "float", "block_structure": [128, 128]}}}


@pytest.mark.parametrize("q,key", [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "modules_to_not_convert"),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "llm_int8_skip_modules"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "llm_int8_skip_modules"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, "modules_to_not_convert"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "modules_to_not_convert"),
    ({"quant_method": "compressed-tensors", "config_groups": _NVFP4}, "ignore"),
    ({"quant_method": "compressed-tensors", "config_groups": _FP8_BLOCK}, "ignore"),
    ({"quant_method": "mxfp4"}, "modules_to_not_convert"),
], ids=["fp8", "bnb_int8", "bnb_nf4", "awq", "gptq", "nvfp4", "ct_fp8_block", "mxfp4"])
def test_a_skip_list_naming_one_layer_is_refused_by_name_in_every_format(q: dict[str, Any], key: str) -> None:
    """One layer kept in bf16 cannot be sized from these fields: a refusal naming the entry, never a crash."""
    problems = refusal({**published("llama3_1_8b.json"), "quantization_config": {**q, key: ["lm_head", _ONE_LAYER]}})
    assert [p.split(" is not")[0] for p in problems] == [f"quantization_config.{key}: {_ONE_LAYER!r}"]


@pytest.mark.parametrize("q,fmt,group", [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8_block", 128),
    ({"quant_method": "compressed-tensors", "config_groups": _FP8_BLOCK}, "fp8_block", 128),
    ({"quant_method": "compressed-tensors", "config_groups": _NVFP4}, "nvfp4", None),
])
def test_a_skip_list_of_whole_parts_is_kept_in_every_float_format(q: dict[str, Any], fmt: str, group) -> None:
    """Attention kept in bf16 (as DeepSeek's and Qwen's fp8 releases list it) adds to the default kept parts."""
    skip = "ignore" if q["quant_method"] == "compressed-tensors" else "modules_to_not_convert"
    cfg = _quant({**q, skip: ["lm_head", "model.layers.*.self_attn"]})
    assert (cfg.ckpt_format, cfg.ckpt_group_size, cfg.ckpt_keep) == (
        fmt, group, ("router", "embeddings", "head", "attention"))


@pytest.mark.parametrize("entry,part", [
    ("model.layers.*.self_attn", "attention"), ("model.layers.*.linear_attn", "attention"),
    ("re:.*attention$", "attention"), ("model.layers.*.mlp.router", "router"),
    ("model.layers.*.mlp.gate", "router"), ("model.layers.*.block_sparse_moe.gate", "router"),
    ("model.embed_tokens", "embeddings"), ("transformer.wte", "embeddings"), ("lm_head", "head"),
    ("model.layers.*.mlp.experts", "experts"), ("model.layers.*.mlp.shared_expert", "shared_experts"),
    ("model.layers.*.mlp.shared_experts", "shared_experts"), ("model.layers.*.mlp", "dense_ffn"),
])
@pytest.mark.parametrize("method", ["awq", "mxfp4"])
def test_each_skip_list_entry_keeps_the_part_it_names(entry: str, part: str, method: str) -> None:
    """A skip-list entry (as AutoAWQ, Mixtral's gate or gpt-oss's releases spell them) keeps its part in bf16, on
    top of what the format keeps anyway (the router, embeddings and head; mxfp4 converts only the experts):
    ckpt_keep is None when the part is kept anyway, else that default with the part added."""
    from engine.checkpoint import DEFAULT_KEEP, _KEEP
    default = DEFAULT_KEEP.get(method, _KEEP)
    cfg = _quant({"quant_method": method, "modules_to_not_convert": [entry]})
    assert cfg.ckpt_keep == (None if part in default else (*default, part))


def test_awq_bits_default_as_transformers_reads_them_and_gptq_needs_its_own() -> None:
    """AwqConfig reads a file without bits as 4-bit; GPTQConfig has no default (transformers refuses the file),
    so a gptq file without bits is refused at that key, not sized as 4-bit."""
    transformers = pytest.importorskip("transformers", minversion="5.0")
    assert transformers.AwqConfig.from_dict({"quant_method": "awq"}).bits == 4
    with pytest.raises(TypeError, match="bits"):
        transformers.GPTQConfig.from_dict({"quant_method": "gptq"})
    cfg = _quant({"quant_method": "awq"})
    assert (cfg.ckpt_format, cfg.ckpt_bits, cfg.ckpt_group_size) == ("awq", 4, 128)
    assert _quant({"quant_method": "gptq", "bits": 8}).ckpt_bits == 8
    for q in ({"quant_method": "gptq"}, {"quant_method": "awq", "bits": None}):
        assert refusal({**published("llama3_1_8b.json"), "quantization_config": q}) == [
            f"quantization_config.bits: None is not expressible ({q['quant_method']} is read with its bit width "
            f"(2, 3, 4 or 8))"]


@pytest.mark.parametrize("groups", [{"group_0": {"input_activations": {"num_bits": 8}}}, {"group_0": "fp8"},
                                    {"a": {"weights": {"num_bits": 8}}, "b": {"weights": {"num_bits": 4}}}])
def test_compressed_tensors_without_one_group_of_weights_is_refused_not_crashed(groups: dict) -> None:
    """No weights scheme (one group without "weights", a group that is no mapping, two groups): nothing to size
    the weights by, so a refusal at config_groups."""
    problems = refusal({**published("llama3_1_8b.json"),
                          "quantization_config": {"quant_method": "compressed-tensors", "config_groups": groups}})
    assert [p.split(":")[0] for p in problems] == ["quantization_config.config_groups"]


# --- Ministral 3's temperature ----------------------------------------------------------------------------------

def test_a_ministral3_file_without_its_temperature_beta_is_refused_not_crashed() -> None:
    """transformers' Ministral 3 reads rope_parameters.llama_4_scaling_beta on every forward; a file whose
    rope_parameters leave it out is refused at that key."""
    d = published("ministral-3-3b-instruct-2512.json")
    params = {k: v for k, v in d["text_config"]["rope_parameters"].items() if k != "llama_4_scaling_beta"}
    problems = refusal({**d, "text_config": {**d["text_config"], "rope_parameters": params}})
    assert [p.split(":")[0] for p in problems] == ["text_config.rope_parameters.llama_4_scaling_beta"]


# --- GraniteMoeHybrid's attention bias ------------------------------------------------------------------------

def test_a_granite_attention_bias_is_refused_on_import_and_export() -> None:
    """GraniteMoeHybrid's attention_bias puts biases on q, k, v and o only; our `bias` covers the MLP too, so the
    import would count (and expect) MLP biases transformers never builds: refused both ways, named."""
    d = published("granite-4.0-h-small.json")
    assert [p.split(":")[0] for p in refusal({**d, "attention_bias": True})] == ["attention_bias"]
    cfg = import_hf(d).config
    assert not cfg.bias
    assert hf_problems(cfg.replace(bias=True), "granitemoehybrid")[1] == [
        "bias: True is not expressible in granitemoehybrid (GraniteMoeHybrid's attention_bias leaves the MLP "
        "without biases)"]


# --- weight codecs ------------------------------------------------------------------------------------------------

def test_a_misspelt_codec_is_named_in_both_directions(monkeypatch) -> None:
    """A family's pairs naming a codec weights.py does not know (here "rowz") fail saying which codec, whether a
    checkpoint is read or written."""
    import torch
    cfg = ModelConfig(name="t", vocab_size=16, context_length=8, d_model=8, n_layers=1, n_heads=2, d_ff=16,
                      norm="rmsnorm", position="rope", ffn="swiglu", bias=False, tie_embeddings=True)
    monkeypatch.setattr(weights, "pairs_for", lambda c, f: [Pair("model.norm", ("final_norm",), "rowz")])
    ours = {"final_norm.weight": torch.ones(8), "tok_emb.weight": torch.zeros(16, 8)}
    with pytest.raises(ValueError, match="^rowz: not a weight codec$"):
        weights.ours_to_hf(cfg, "llama", ours)
    with pytest.raises(ValueError, match="^rowz: not a weight codec$"):
        weights.hf_to_ours(cfg, "llama", {"model.norm.weight": torch.ones(8)})


# --- the Mamba-2 dt clamp ------------------------------------------------------------------------------------------

def test_time_step_limit_keeps_both_ends() -> None:
    """A time_step_limit [0.01, 5.0] clamps dt from below at 0.01 and above at 5 in the imported mixer, as in
    transformers' Mamba-2 layer; the published [0, inf] is no clamp at all."""
    d = published("granite-4.0-h-small.json")
    cfg = import_hf({**d, "time_step_limit": [0.01, 5.0]}).config
    assert (cfg.ssm_dt_min, cfg.ssm_dt_max) == (0.01, 5.0)
    assert (import_hf(d).config.ssm_dt_min, import_hf(d).config.ssm_dt_max) == (0.0, None)
