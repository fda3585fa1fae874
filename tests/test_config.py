"""ModelConfig declarations, derived values and validation messages (all problems at once, field named)."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import FIELDS, GROUPS, ConfigError, ModelConfig, coerce


def problems(**values) -> list[str]:
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict(values)
    return e.value.problems


def test_every_field_is_declared_once_with_help_group_and_a_valid_default():
    assert list(FIELDS) == [f.name for f in dataclasses.fields(ModelConfig)]
    for spec in FIELDS.values():
        assert spec.group in GROUPS and spec.help.endswith(".") and len(spec.help) > 20, spec.name
        scalar = spec.item if spec.type is tuple else spec.type   # list fields: tuple of one scalar type
        assert scalar in (int, float, bool, str) and (spec.null is not None) == spec.optional, spec.name
        assert getattr(ModelConfig(), spec.name) == spec.default


def test_allowed_texts():
    assert FIELDS["norm"].allowed() == "one of layernorm, rmsnorm"
    assert FIELDS["dropout"].allowed() == "a number >= 0 and < 1"
    assert FIELDS["n_kv_heads"].allowed() == "an integer >= 1, or null (same as n_heads (MHA))"
    assert FIELDS["bias"].allowed() == "true or false"


def test_the_issue_examples_word_for_word():
    assert problems(n_heads=32, n_kv_heads=5) == ["n_kv_heads: 5 does not divide n_heads=32"]
    assert problems(norm="batchnorm") == ["norm: 'batchnorm' is not one of layernorm, rmsnorm"]
    assert problems(n_layer=3) == ["unknown key `n_layer` (did you mean n_layers?)"]
    [rope] = problems(position="rope", head_dim=7)
    assert rope.startswith("head_dim: rope needs an even rotary width") and rope.endswith("= 7")


def test_all_problems_are_reported_at_once_each_naming_its_field():
    found = problems(n_layer=3, norm="batchnorm", dropout=1.0, d_model="wide", n_heads=32, n_kv_heads=5,
                     vocab_size=None, tie_embeddings="maybe", zzz=1)
    assert len(found) == 8                                         # n_heads=32 is fine
    for key in ("n_layer", "norm", "dropout", "d_model", "n_kv_heads", "vocab_size", "tie_embeddings", "zzz"):
        assert sum(key in p for p in found) >= 1, key
    assert "dropout: 1.0 is not a number >= 0 and < 1" in found
    assert "d_model: 'wide' is not an integer >= 1" in found
    assert "unknown key `zzz`" in found and "vocab_size: null is not an integer >= 1" in found


def test_cross_field_rules():
    assert problems(norm="rmsnorm", norm_bias=True) == ["norm_bias: rmsnorm has no bias; set norm_bias: false"]
    assert problems(d_model=4, n_heads=8) == ["head_dim: d_model=4 // n_heads=8 is 0; set head_dim or use fewer "
                                              "heads"]
    assert ModelConfig(d_model=4, n_heads=8, head_dim=2).attn_width == 16
    [partial] = problems(position="rope", rope_fraction=0.3)        # 64 * 0.3 = 19.2
    assert partial.startswith("head_dim:") and "19.2" in partial
    assert problems(position="rope", rope_fraction=1e-12)[0].startswith("head_dim:")   # zero rotating dims
    assert problems(context_length=2 ** 25)[0].startswith("context_length:")
    assert ModelConfig(context_length=2 ** 25, position="rope").context_length == 2 ** 25


def test_a_field_that_failed_to_parse_does_not_trigger_rules_on_its_old_value():
    # n_heads keeps no stale value of 12 to complain about: only the parse problem is reported
    assert problems(n_heads="abc", n_kv_heads=5) == ["n_heads: 'abc' is not an integer >= 1"]
    assert problems(position="rope", rope_fraction="nan") == ["rope_fraction: 'nan' is not a number > 0 and <= 1"]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 10 ** 400])
def test_non_finite_and_huge_numbers_are_problems_not_crashes(value):
    [p] = problems(rope_base=value)
    assert p.startswith("rope_base: ")
    with pytest.raises(ConfigError, match="norm_eps"):
        ModelConfig(norm_eps=float("inf"))


def test_coerce_reads_cli_and_url_strings():
    assert coerce("d_model", "1_024") == 1024 and coerce("d_model", "4096.0") == 4096
    assert coerce("norm_eps", "1e-6") == 1e-6 and coerce("rope_base", 500000) == 500000.0
    assert coerce("bias", "no") is False and coerce("tie_embeddings", "True") is True
    assert coerce("n_kv_heads", "null") is None and coerce("attn_window", "") is None
    assert coerce("name", "null") == "null" and coerce("name", "") == ""   # a name is just text
    for name, raw in [("d_model", "12.5"), ("d_model", True), ("bias", "maybe"), ("norm_eps", "inf"),
                      ("vocab_size", None), ("name", 3)]:
        with pytest.raises(ValueError, match=f"^{name}: "):
            coerce(name, raw)


def test_derived_values():
    c = ModelConfig()
    assert (c.kv_heads, c.head_width, c.attn_width, c.kv_width, c.ffn_width) == (12, 64, 768, 768, 3072)
    assert c.attention_kind == "MHA" and c.rotary_dim == 0 and not c.gated
    g = ModelConfig(ffn="swiglu", n_kv_heads=4, position="rope", rope_fraction=0.25)
    assert g.ffn_width == 2048 and g.gated and g.attention_kind == "GQA-4" and g.kv_width == 256
    assert g.rotary_dim == 16 and ModelConfig(n_kv_heads=1).attention_kind == "MQA"
    assert ModelConfig(ffn="swiglu", d_model=4096).ffn_width == 11008        # Llama-2-7B's width
    assert ModelConfig(ffn="swiglu", ffn_multiple_of=1).ffn_width == 2048
    w = ModelConfig(n_layers=6, attn_window=128, global_every=3)
    assert w.layer_windows == [128, 128, None, 128, 128, None]
    assert ModelConfig(global_every=2).layer_windows == [None] * 12          # no window: ignored


def test_frozen_and_replace_validates():
    c = ModelConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.d_model = 5
    with pytest.raises(ConfigError, match="n_kv_heads: 5 does not divide n_heads=12"):
        c.replace(n_kv_heads=5)
    assert ModelConfig.from_dict({"d_model": 1024}, base=c.replace(n_layers=3)).n_layers == 3


def test_from_dict_needs_a_mapping():
    with pytest.raises(ConfigError, match="expected a mapping"):
        ModelConfig.from_dict([("d_model", 3)])


ANYTHING = st.none() | st.booleans() | st.integers(-5, 10 ** 6) | st.floats(allow_nan=True) | st.text(max_size=8)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.dictionaries(st.sampled_from(list(FIELDS) + ["n_layer", "dmodel", "colour"]), ANYTHING, max_size=8))
def test_any_input_gives_a_config_or_field_named_problems(data):
    try:
        cfg = ModelConfig.from_dict(data)
    except ConfigError as e:
        assert e.problems
        for p in e.problems:
            assert p.split(":")[0] in FIELDS or p.startswith("unknown key `"), p
        return
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_llama3_scaling_refuses_a_high_band_below_the_low_band():
    """Llama 3.1's rule blends between L0/high and L0/low: a high_freq_factor below low_freq_factor has no band
    and is refused by name; equal factors (a hard cut at L0/low) are allowed, and other scalings ignore both."""
    llama3 = dict(position="rope", rope_scaling="llama3", rope_factor=8.0, rope_low_freq_factor=2.0)
    assert problems(**llama3, rope_high_freq_factor=1.5) == [
        "rope_high_freq_factor: 1.5 must be at least rope_low_freq_factor=2"]
    ModelConfig(**llama3, rope_high_freq_factor=2.0)
    ModelConfig(**{**llama3, "rope_scaling": "linear"}, rope_high_freq_factor=1.5)
