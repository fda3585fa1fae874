"""import-hf and export-hf of the 2025-26 families, message by message and number by number: each refusal names the
key (or our field) with the value and the reason; a key the family's config class has but does not use is accepted
and listed; a key transformers reads changes what is imported or exported exactly as it changes transformers' model.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from engine.budget.params import count_params
from engine.config import ConfigError, ModelConfig
from engine.interop import from_hf_config, to_hf_config
from engine.interop.hf_config import import_hf
from engine.interop.hf_export import hf_problems
from engine.interop.weights import hf_to_ours, ours_to_hf
from engine.limits import MAX_INT
from engine.model import build_model

DATA = Path(__file__).parent / "data" / "hf_configs"


def _published(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.json").read_text())


def _refused(d: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as e:
        import_hf(d)
    return e.value.problems


# ---- importers: what is read, what is listed ------------------------------------------------------------------
def test_qwen3_next_lists_its_sliding_window_keys_as_unread() -> None:
    """Qwen3NextConfig carries Qwen2's window keys but builds no window: each one present is accepted and listed."""
    d = {**_published("qwen3-next-80b-a3b"), "sliding_window": 4096, "max_window_layers": 28}
    got = import_hf(d)
    assert [line for line in got.ignored if "window" in line] == [
        f"{key}: qwen3_next has no sliding window; transformers does not read it"
        for key in ("use_sliding_window", "sliding_window", "max_window_layers")]
    assert got.config.attn_window is None


def test_qwen3_next_without_experts_is_dense_whatever_its_moe_keys_say() -> None:
    """num_experts 0: transformers builds a dense MLP of intermediate_size in every layer and reads none of the MoE
    keys, so a file that still carries them imports as that dense model."""
    cfg = import_hf({**_published("qwen3-next-80b-a3b"), "num_experts": 0}).config
    assert (cfg.n_experts, cfg.ffn, cfg.d_ff) == (None, "swiglu", 5120)


def test_qwen3_5_keeps_its_state_dtype_through_export() -> None:
    """Qwen3.5 says mamba_ssm_dtype float32: the exported config says it again, so the round trip keeps the
    recurrent state in fp32 (its memory and its numbers)."""
    moe = _published("qwen3.5-35b-a3b")
    moe["text_config"] = {**moe["text_config"], "mamba_ssm_dtype": "float32"}
    for d in (_published("qwen3.5-9b"), moe):
        got = import_hf(d)
        assert got.config.state_dtype == "fp32"
        family, d = to_hf_config(got.config, got.family)
        assert d["mamba_ssm_dtype"] == "float32"
        assert from_hf_config({"model_type": family, **d}) == got.config


def test_smollm3_default_windows_are_on_the_nope_layers_as_transformers_places_them() -> None:
    """use_sliding_window with no layer_types: transformers slides the window on the NoPE layers (every 4th)."""
    transformers = pytest.importorskip("transformers", minversion="5.0")
    d = dict(model_type="smollm3", num_hidden_layers=8, use_sliding_window=True, sliding_window=512)
    theirs = transformers.AutoConfig.for_model(**d).layer_types
    cfg = from_hf_config(d)
    assert [("sliding_attention" if w is not None else "full_attention") for w in cfg.layer_windows] == theirs
    assert cfg.nope_layers == (4, 8)


def test_qwen3_vl_lists_its_m_rope_keys_as_plain_rope() -> None:
    """import-hf --verbose says why Qwen3-VL's M-RoPE sections are not refused."""
    got = import_hf(_published("qwen3-vl-4b-instruct"))
    why = "M-RoPE: with text alone its three position streams are equal, so it is plain RoPE"
    assert [line for line in got.ignored if "mrope" in line] == [
        f"text_config.rope_scaling.mrope_section: {why}", f"text_config.rope_scaling.mrope_interleaved: {why}"]


def test_glm4_moe_reads_transformers_5_name_for_its_mtp_layers() -> None:
    """num_mtp_layers (transformers 5's spelling of num_nextn_predict_layers) sets the MTP depth."""
    d = {k: v for k, v in _published("glm-4.5").items() if k != "num_nextn_predict_layers"}
    assert import_hf({**d, "num_mtp_layers": 2}).config.mtp_depth == 2


def test_granite_moe_holds_its_expert_width_itself() -> None:
    """granite-4.0-h-small's experts are intermediate_size (512) wide as a field of their own: a later change of
    the dense width d_ff (which no layer of this model uses) leaves the experts' count alone."""
    cfg = import_hf(_published("granite-4.0-h-small")).config
    assert cfg.expert_d_ff == 512
    assert count_params(cfg.replace(d_ff=2048)).total == count_params(cfg).total


def test_multimodal_wrapper_lists_the_text_keys_it_overrides() -> None:
    """Kimi K2.5 hands a kimi_k2 text_config to DeepseekV3 and ties its head by the top-level key: both are
    listed with what transformers does instead."""
    got = import_hf({"model_type": "kimi_k25", "text_config": _published("kimi-k2")})
    assert got.family == "deepseek_v3"
    assert got.ignored == [
        "text_config.model_type: 'kimi_k2' is read as deepseek_v3 (transformers renames it)",
        "text_config.tie_word_embeddings: False is not read; transformers 5 ties the kimi_k25 head by the top-level "
        "key (True)"]
    assert got.config.tie_embeddings is True


def test_a_text_config_of_a_family_transformers_keeps_is_not_said_to_be_renamed() -> None:
    """Ministral 3's text_config is ministral3, not the mistral3 wrapper's default mistral: read as it says, and
    no line claims a renaming."""
    got = import_hf(_published("ministral-3-3b-instruct-2512"))
    assert got.family == "ministral3"
    assert not [line for line in got.ignored if line.startswith("text_config.model_type")]


# ---- importers: refusals, message by message ------------------------------------------------------------------
def test_seed_oss_biases_our_bias_switches_cannot_place() -> None:
    d = dict(model_type="seed_oss", attention_bias=True, attention_out_bias=True, mlp_bias=False)
    assert _refused(d) == ["attention_out_bias: True is not expressible (with attention_bias=True, mlp_bias=False: "
                           "our `bias` covers o and the MLP alike, and qkv_bias q, k and v)"]


def test_dots1_without_its_expert_count() -> None:
    # Dots1Config defaults n_routed_experts and num_experts_per_tok to null: the first is named
    assert _refused({"model_type": "dots1"}) == [
        "n_routed_experts: None is not expressible (transformers cannot build the MoE layers without it)"]


def test_granite_position_embedding_type() -> None:
    d = {**_published("granite-4.0-h-small"), "position_embedding_type": "alibi"}
    assert _refused(d) == ["position_embedding_type: 'alibi' is not expressible (rope, nope or null (no RoPE))"]


def test_granite_mamba_heads_that_do_not_fill_the_inner_width() -> None:
    d = {**_published("granite-4.0-h-small"), "mamba_n_heads": 100}
    assert _refused(d) == ["mamba_n_heads: 100 is not expressible (heads * mamba_d_head (64) must be the inner "
                           "width 8192 (mamba_expand * hidden_size))"]


@pytest.mark.parametrize("dropout", [0.1, 1])
def test_nemotron_h_hidden_dropout(dropout: float) -> None:
    d = {**_published("nemotron-h-4b"), "hidden_dropout": dropout}
    assert _refused(d) == [f"hidden_dropout: {dropout!r} is not expressible (our dropout also acts on the residual "
                           "stream)"]


def test_an_integer_too_large_for_a_json_double_is_refused_by_its_size() -> None:
    assert _refused({"model_type": "llama", "hidden_size": 10**30}) == [
        f"hidden_size: a 31-digit integer is more than {MAX_INT:,}"]


# ---- exporters -------------------------------------------------------------------------------------------------
def test_smollm3_export_with_biases_builds_our_count_in_transformers() -> None:
    """bias=True covers q, k, v, o and the MLP: SmolLM3Config must say attention_bias and mlp_bias, or
    transformers builds the model without them."""
    transformers = pytest.importorskip("transformers", minversion="5.0")
    cfg = from_hf_config(dict(model_type="smollm3", vocab_size=97, hidden_size=32, intermediate_size=48,
                              num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                              attention_bias=True, mlp_bias=True))
    assert cfg.bias
    model_type, d = to_hf_config(cfg, "smollm3")
    with torch.device("meta"):
        hf = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(model_type, **d))
    assert sum(p.numel() for p in hf.parameters()) == count_params(cfg).total


def test_nemotron_h_export_names_its_activation_and_the_layer_it_has_no_kind_for() -> None:
    cfg = import_hf(_published("nemotron-h-4b")).config
    assert hf_problems(cfg, "nemotron_h")[1] == []
    assert hf_problems(cfg.replace(ffn="swiglu"), "nemotron_h")[1] == [
        "ffn: 'swiglu' is not expressible in nemotron_h (its MLP and experts apply relu2)"]
    ffn_types = ("dense",) + cfg.ffn_types[1:]   # layer 1: a Mamba-2 mixer and an MLP in one layer
    assert hf_problems(cfg.replace(ffn_types=ffn_types), "nemotron_h")[1] == [
        "layer_types: layer 1 (mamba2, dense FFN) has no nemotron_h layer kind"]


_LLAMA = ModelConfig(vocab_size=61, context_length=32, d_model=32, n_layers=2, n_heads=4, d_ff=48, norm="rmsnorm",
                     position="rope", ffn="swiglu", bias=False)


def test_a_dense_writer_names_the_attention_gate_and_a_second_rope() -> None:
    assert hf_problems(_LLAMA, "llama")[1] == []
    assert hf_problems(_LLAMA.replace(attn_gate="head"), "llama")[1] == [
        "attn_gate: 'head' is not expressible in llama (no attention output gate)"]
    assert hf_problems(_LLAMA.replace(rope_local_base=10000.0), "llama")[1] == [
        "rope_local_base: 10000.0 is not expressible in llama (one RoPE for every layer)"]


# ---- weights ---------------------------------------------------------------------------------------------------
def test_a_checkpoint_with_tensors_our_model_has_no_place_for_names_them() -> None:
    """Converting a checkpoint with extra tensors refuses, naming the first five (sorted) of them."""
    cfg = _LLAMA.replace(tie_embeddings=False)
    hf = ours_to_hf(cfg, "llama", build_model(cfg, device="cpu").state_dict())
    extra = {f"model.extra.{i}.weight": torch.zeros(1) for i in range(7)}
    with pytest.raises(KeyError) as e:
        hf_to_ours(cfg, "llama", {**hf, **extra})
    assert e.value.args[0] == ("llama tensors with no place in our model: model.extra.0.weight, model.extra.1.weight, "
                               "model.extra.2.weight, model.extra.3.weight, model.extra.4.weight")


def test_dots1_without_its_expert_count_is_refused_once_not_with_its_other_moe_keys():
    """The published file without n_routed_experts: that one refusal, no "unknown key" lines for the MoE keys
    that come with it (moe_intermediate_size, n_group, ...)."""
    d = json.loads((DATA / "dots.llm1.inst.json").read_text())
    del d["n_routed_experts"]
    with pytest.raises(ConfigError) as e:
        import_hf(d)
    assert e.value.problems == ["n_routed_experts: None is not expressible (transformers cannot build the MoE "
                                "layers without it)"]
