"""YAML: lossless round trips, safe loading only, one clear message per malformed document."""
from __future__ import annotations

import pytest

from engine.config import FIELDS, ConfigError, ModelConfig
from engine.presets import PRESETS


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_round_trips(name):
    cfg = PRESETS[name].config
    text = cfg.to_yaml()
    assert ModelConfig.from_yaml(text) == cfg
    assert [line.split(":")[0] for line in text.splitlines()] == list(FIELDS)   # declaration order, flat


# drawn configs round-trip in tests/test_params.py (one draw for their counts and their YAML)


@pytest.mark.parametrize("name", ["null", "~", "true", "1e3", "a: b", "- x", "ü \u2603 \x07", " x "])
def test_awkward_names_round_trip(name):
    cfg = ModelConfig(name=name)
    assert ModelConfig.from_yaml(cfg.to_yaml()).name == name


@pytest.mark.parametrize("name", ["", "   "])
def test_an_empty_name_is_refused(name):
    with pytest.raises(ConfigError, match="name: empty; give the config a label"):
        ModelConfig(name=name)
    with pytest.raises(ConfigError, match="name: empty"):
        ModelConfig.from_yaml(f"name: '{name}'\n")


def test_a_partial_document_keeps_the_defaults():
    cfg = ModelConfig.from_yaml("# a comment\nd_model: 1024\nn_heads: 16\nnorm_eps: 1e-6\nrope_base: 500000\n")
    assert (cfg.d_model, cfg.n_heads, cfg.norm_eps, cfg.rope_base, cfg.n_layers) == (1024, 16, 1e-6, 5e5, 12)


def test_python_tags_are_an_error_and_never_executed(tmp_path):
    marker = tmp_path / "executed"
    for doc in [f'!!python/object/apply:os.system ["touch {marker}"]',
                f'name: !!python/object/apply:os.system ["touch {marker}"]',
                "d_model: !!python/name:os.system", "name: !!python/object:engine.config.ModelConfig {}"]:
        with pytest.raises(ConfigError) as e:
            ModelConfig.from_yaml(doc)
        [message] = e.value.problems
        assert message.startswith("yaml: ") and "python/" in message and "only plain values" in message
    assert not marker.exists()


@pytest.mark.parametrize("doc, expected", [
    ("", "yaml: the document is empty; expected a mapping such as `d_model: 768`"),
    ("# only a comment\n\n", "yaml: the document is empty; expected a mapping such as `d_model: 768`"),
    ("- d_model: 768\n- n_layers: 2\n", "yaml: expected a mapping of field: value such as `d_model: 768`, "
                                        "got a list"),
    ("768", "yaml: expected a mapping of field: value such as `d_model: 768`, got the single value 768"),
    ("gpt2", "yaml: expected a mapping of field: value such as `d_model: 768`, got the single value 'gpt2'"),
    ("d_model: [768\n", "yaml: not valid YAML at line 2, column 1: while parsing a flow sequence, "
                      "expected ',' or ']', but got '<stream end>'"),
    ("d_model: 768\n  n_layers: 2\n", "yaml: not valid YAML at line 2, column 11: mapping values are not "
                                      "allowed here"),
    ("a: 1\n---\nb: 2\n", "yaml: not valid YAML at line 2, column 1: expected a single "
                            "document in the stream, but found another document"),
])
def test_malformed_documents_get_one_clear_message(doc, expected):
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_yaml(doc)
    assert e.value.problems == [expected]


def test_field_problems_in_a_document_are_all_reported():
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_yaml("n_layer: 2\nnorm: batchnorm\ndropout: 1.5\nn_kv_heads: 5\n")
    assert e.value.problems == ["unknown key `n_layer` (did you mean n_layers?)",
                                "norm: 'batchnorm' is not one of layernorm, rmsnorm",
                                "dropout: 1.5 is not a number >= 0 and < 1",
                                "n_kv_heads: 5 does not divide n_heads=12"]
