"""ModelConfig's problems restated at the config.json key that set the field, by hand for each way a key is found
(flat, nested in a RoPE or linear-attention mapping, under a prefix) or not (two keys, a computed value, true vs 1)."""
from __future__ import annotations

import pytest

from engine.interop.hf_keys import field_keys, in_file_terms

BAD = "is not an integer >= 1"


@pytest.mark.parametrize("field, value, d, where, want", [
    ("n_layers", -1, {"num_hidden_layers": -1}, "", f"num_hidden_layers: -1 {BAD} (n_layers)"),
    ("n_layers", -1, {"n_layer": -1}, "text_config.", f"text_config.n_layer: -1 {BAD} (n_layers)"),
    ("vocab_size", 0, {"vocab_size": 0}, "", f"vocab_size: 0 {BAD}"),        # the key is our field's name
    ("n_layers", 8, {"num_hidden_layers": 8.0}, "", f"num_hidden_layers: 8 {BAD} (n_layers)"),   # 8 is 8.0
    ("n_layers", True, {"num_hidden_layers": 1}, "", f"config.json: n_layers (as imported): True {BAD}"),
    ("n_layers", 1, {"num_hidden_layers": True}, "", f"config.json: n_layers (as imported): 1 {BAD}"),
    ("d_ff", 0, {"intermediate_size": 0, "n_inner": 0}, "", f"config.json: d_ff (as imported): 0 {BAD}"),
    ("d_ff", 0, {"n_embd": 0}, "", f"config.json: d_ff (as imported): 0 {BAD}"),   # computed, not read
    ("rope_factor", 0, {"rope_scaling": {"factor": 0}}, "", f"rope_scaling.factor: 0 {BAD} (rope_factor)"),
    ("rope_factor", 0, {"rope_parameters": {"factor": 0}}, "", f"rope_parameters.factor: 0 {BAD} (rope_factor)"),
    ("rope_factor", 0, {"rope_parameters": {"full_attention": {"factor": 0}}}, "",
     f"rope_parameters.full_attention.factor: 0 {BAD} (rope_factor)"),
    ("rope_short_factor", [1.0, 0.0], {"rope_scaling": {"short_factor": [1.0, 0.0]}}, "",
     f"rope_scaling.short_factor: [1.0, 0.0] {BAD} (rope_short_factor)"),
    ("gdn_k_heads", 0, {"linear_attn_config": {"num_heads": 0}}, "",
     f"linear_attn_config.num_heads: 0 {BAD} (gdn_k_heads)"),
    ("gdn_k_heads", 0, {"linear_num_heads": 0}, "", f"linear_num_heads: 0 {BAD} (gdn_k_heads)"),
    ("rope_base", 0, {"rope_scaling": 5, "rope_theta": 0}, "", f"rope_theta: 0 {BAD} (rope_base)"),
])
def test_a_problem_is_told_at_the_one_key_that_set_it(field, value, d, where, want):
    assert in_file_terms([f"{field}: {value!r} {BAD}".replace("8.0", "8")], {field: value}, d, where) == [want]


def test_a_field_the_reader_did_not_build_and_a_problem_of_no_field():
    problems = [f"d_model: 0 {BAD}", "layer_types: 3 entries for 2 layers", "vocab: the file has none"]
    assert in_file_terms(problems, {}, {"hidden_size": 0}) == [
        f"config.json: d_model (as imported): 0 {BAD}",
        "config.json: layer_types (as imported): 3 entries for 2 layers",
        "config.json: vocab: the file has none"]


def test_one_key_that_set_several_fields_is_told_once_naming_them_all():
    problems = [f"ffn_out_scale: 0 {BAD}", f"attn_out_scale: 0 {BAD}", f"n_layers: 0 {BAD}"]
    fields = {"ffn_out_scale": 0, "attn_out_scale": 0, "n_layers": 0}
    assert in_file_terms(problems, fields, {"residual_multiplier": 0, "n_layers": 0}) == [
        f"residual_multiplier: 0 {BAD} (ffn_out_scale, attn_out_scale)", f"n_layers: 0 {BAD}"]


def test_field_keys_lists_every_path_in_order():
    assert field_keys("rope_factor") == ("rope_scaling.factor", "rope_parameters.factor",
                                         "rope_parameters.full_attention.factor")
    assert field_keys("gdn_k_heads") == ("linear_num_key_heads", "linear_num_heads", "linear_attn_config.num_heads")
    assert field_keys("rope_base") == ("rope_theta", "rotary_emb_base", "rope_scaling.rope_theta",
                                       "rope_parameters.rope_theta", "rope_parameters.full_attention.rope_theta")
    assert field_keys("name") == ()
