"""import-hf names what the user wrote: every problem with a config.json starts with a key path of that file
(dotted inside a mapping, text_config.-prefixed in a multimodal file) or with `config.json` for the file as a
whole, never with one of our ModelConfig fields; a value refused is reported at the key that holds it.

The property is checked on every published config (tests/data/hf_configs), each key changed the way a user's
typo would change it (by tests/test_import_golden.py's sweep, with wrong_names below: one import per typo for both
checks), and here message by message for the cases that used to name the wrong thing.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from engine.config import ConfigError
from engine.interop.hf_config import import_hf
from tests.import_typos import DATA, KeyPath, changed

def _problems(name: str, path: KeyPath, value: Any) -> list[str]:
    with pytest.raises(ConfigError) as e:
        import_hf(changed((DATA / name).read_text(), path, value))
    return e.value.problems


_TYPES = "(supported RoPE types: default, linear, dynamic, llama3, yarn, longrope)"


@pytest.mark.parametrize("name,path,value,problems", [
    # a head width that is not positive: the size's own problem, not the rotary fraction's
    ("mistral_7b.json", ("hidden_size",), -1, ["hidden_size: -1 is not an integer >= 1 (d_model)"]),
    ("mistral_7b.json", ("num_attention_heads",), -1, ["num_attention_heads: -1 is not an integer >= 1 (n_heads)"]),
    ("deepseek-v2-lite.json", ("qk_rope_head_dim",), -1, ["qk_rope_head_dim: -1 is not an integer >= 2"]),
    # ModelConfig's refusals at the file's key, our field in brackets; text_config's keys keep their prefix
    ("Mixtral-8x7B-v0_1.json", ("rms_norm_eps",), -1.0, ["rms_norm_eps: -1.0 is not a number > 0 (norm_eps)"]),
    ("gemma-3-27b-it.json", ("text_config", "rope_theta"), -1.0,
     ["text_config.rope_theta: -1.0 is not a number > 1 (rope_base)"]),
    ("gpt2.json", ("n_layer",), -1, ["n_layer: -1 is not an integer >= 1 (n_layers)"]),
    # a value no one key holds (GPT-2's d_ff is 4 * n_embd) is the file's, never pinned on a key
    ("gpt2.json", ("n_embd",), -1, ["n_embd: -1 is not an integer >= 1 (d_model)",
                                    "config.json: d_ff (as imported): -4 is not an integer >= 1, or null (4*d_model "
                                    "dense, 8/3*d_model gated (rounded up to ffn_multiple_of))"]),
    # the key as the file spells it
    ("deepseek-v2-lite.json", ("rope_scaling", "type"), "no-such-value",
     [f"rope_scaling.type: 'no-such-value' is not expressible {_TYPES}"]),
    ("olmo-3-32b.json", ("rope_scaling", "rope_type"), "no-such-value",   # read as its full layers' mapping
     [f"rope_scaling.rope_type: 'no-such-value' is not expressible {_TYPES}"]),
    ("redpajama_3b_v1.json", ("rotary_pct",), -1.0,
     ["rotary_pct: -1.0 is not expressible (rotates no dimension of the head)"]),
    ("qwen3.5-9b.json", ("text_config", "rope_parameters", "partial_rotary_factor"), -1.0,
     ["text_config.rope_parameters.partial_rotary_factor: -1.0 is not expressible (rotates no dimension of the "
      "head)"]),
    # a string where a list of modules belongs: one type problem, not one per letter
    ("llama-3.1-8b-instruct-bnb-int8.json", ("quantization_config", "llm_int8_skip_modules"), "no-such-value",
     ["quantization_config.llm_int8_skip_modules: 'no-such-value' has the wrong type or value (expected a list)"]),
    # what the model does not compute, with why (Llama 4's router jitter is a training-time noise)
    ("llama-4-scout-17b-16e.json", ("text_config", "router_jitter_noise"), 0.5,
     ["text_config.router_jitter_noise: 0.5 is not expressible (training-time input jitter of the router is not "
      "modelled)"]),
    # a layer count below 1: its own problem, not that of a per-layer list built from it
    ("gemma-3-12b-it.json", ("text_config", "num_hidden_layers"), -1,
     ["text_config.num_hidden_layers: -1 is not an integer >= 1 (n_layers)"]),
    ("kimi-linear-48b-a3b-instruct.json", ("num_hidden_layers",), -1,
     ["num_hidden_layers: -1 is not an integer >= 1 (n_layers)"]),
    ("qwen1.5-moe-a2.7b.json", ("num_hidden_layers",), -1, ["num_hidden_layers: -1 is not an integer >= 1 (n_layers)"]),
])
def test_each_problem_reads_in_the_file_s_terms(name: str, path: KeyPath, value: Any, problems: list[str]) -> None:
    assert _problems(name, path, value) == problems


def test_a_layer_left_out_of_kimi_s_lists_is_named_by_them() -> None:
    # the file has no layer_types: the lists it has are what miss layer 28
    assert _problems("kimi-linear-48b-a3b-instruct.json", ("num_hidden_layers",), 28) == [
        "linear_attn_config.kda_layers: [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26] is "
        "not expressible (layers [28] (of num_hidden_layers=28) are in neither it nor full_attn_layers)"]


def test_a_value_two_keys_hold_is_pinned_on_neither() -> None:
    # GPT-NeoX's one dropout comes from hidden_dropout and attention_dropout alike
    with pytest.raises(ConfigError) as e:
        import_hf({"model_type": "gpt_neox", "hidden_dropout": 1.0, "attention_dropout": 1.0})
    assert e.value.problems == ["config.json: dropout (as imported): 1.0 is not a number >= 0 and < 1"]


def test_a_default_rotary_fraction_that_does_not_fit_the_head_is_the_file_s() -> None:
    # StableLM rotates a quarter of each head by default: a quarter of 2464 // 32 = 77 is an odd 19
    with pytest.raises(ConfigError) as e:
        import_hf({"model_type": "stablelm", "hidden_size": 2464, "num_attention_heads": 32})
    assert e.value.problems == ["config.json: the stablelm default rotary fraction 0.25 is not expressible (rotates "
                                "an odd 19 of the 77 head dimensions)"]


def test_exaone4_without_layer_types_needs_a_positive_pattern() -> None:
    # transformers expands sliding_window_pattern only when it is a positive integer ("LLLG", 0: refused by name)
    d = json.loads((DATA / "exaone-4.0-32b.json").read_text())
    del d["layer_types"]
    for pattern in (0, "LLLG"):
        with pytest.raises(ConfigError) as e:
            import_hf({**d, "sliding_window_pattern": pattern})
        assert e.value.problems == [f"sliding_window_pattern: {pattern!r} is not expressible (without layer_types "
                                    "transformers expands only a positive integer pattern)"]
    assert import_hf({**d, "sliding_window_pattern": 4}).config.global_every == 4
    with pytest.raises(ConfigError) as e:   # no window either: transformers divides by the missing pattern
        import_hf({**d, "sliding_window": None})
    assert e.value.problems == ["sliding_window: None is not expressible (without a window transformers needs "
                                "layer_types)"]


@pytest.mark.parametrize("name", ["glm-4.5.json", "dots.llm1.inst.json"])
def test_deepseek_style_keys_these_classes_lack_are_listed_not_refused(name: str) -> None:
    # dots.llm1 ships DeepSeek-V3's topk_method, scoring_func and moe_layer_freq; Glm4MoeConfig and Dots1Config
    # have none of them, so transformers ignores them too: imported, each listed with why (import-hf --verbose)
    d = json.loads((DATA / name).read_text())
    got = import_hf({**d, "topk_method": "noaux_tc", "scoring_func": "sigmoid", "moe_layer_freq": 1})
    listed = {line.split(":")[0] for line in got.ignored}
    assert {"topk_method", "scoring_func", "moe_layer_freq"} <= listed
