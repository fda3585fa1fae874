"""The fields added for real configs (RoPE scaling, ALiBi, per-layer patterns, score scale, gpt-oss sinks and
clamped SwiGLU, DeepSeek MLA/YaRN/MTP) go through every route a config takes: YAML, the URL, the CLI flags and
the editor's text form, and come back equal. List fields are written as YAML lists and as comma-separated text."""
import pytest

from app import state
from engine.cli import main
from engine.config import FIELDS, ModelConfig
from engine.presets import PRESETS

NEW = ["rope_scaling", "rope_factor", "rope_original_context", "rope_low_freq_factor", "rope_high_freq_factor",
       "rope_beta_fast", "rope_beta_slow", "rope_truncate", "rope_attention_factor", "rope_short_factor",
       "rope_long_factor", "rope_local_base", "nope_layers", "layer_types", "attn_scale"]
GROUPS_NOW = {"layer_types": "layers"}   # moved beside the other per-layer lists (engine/layers/mixers.py)

BASE = dict(position="rope", n_layers=4, attn_window=64, d_model=256, n_heads=4)   # head_dim 64: 32 frequencies
CONFIGS = {
    "longrope": ModelConfig(**BASE, rope_scaling="longrope", rope_factor=32.0, rope_original_context=4096,
                            rope_attention_factor=1.19, rope_short_factor=tuple(1.0 + i / 64 for i in range(32)),
                            rope_long_factor=tuple(1.5 ** (i / 4) for i in range(32)), nope_layers=(2, 4),
                            layer_types=("sliding", "full", "sliding", "sliding"), attn_scale=0.0625,
                            rope_local_base=10000.0),
    "yarn": ModelConfig(**BASE, rope_scaling="yarn", rope_factor=4.0, rope_beta_fast=16.0, rope_beta_slow=0.5,
                        rope_truncate=False, rope_original_context=2048),
    "llama3": ModelConfig(**BASE, rope_scaling="llama3", rope_factor=8.0, rope_low_freq_factor=2.0,
                          rope_high_freq_factor=8.0),
    "alibi": ModelConfig(**{**BASE, "position": "alibi"}),
    # gpt-oss: attention sinks, the clamped SwiGLU (limit, alpha), per-layer types, YaRN, MoE with biases
    "gpt-oss-20b": PRESETS["gpt-oss-20b"].config,
    # DeepSeek: MLA ranks, YaRN's mscale_all_dim softmax factor, group scoring, multi-token prediction
    "deepseek-v3": PRESETS["deepseek-v3"].config,
    "deepseek-v2-lite": PRESETS["deepseek-v2-lite"].config,
}
LATER = {"attn_sinks": "attention", "swiglu_limit": "ffn", "swiglu_alpha": "ffn", "mtp_depth": "output",
         "router_group_score": "moe", "rope_mscale_all_dim": "position", "head_bias": "output",
         "logit_scale": "output"}


def test_every_new_field_is_declared_with_help():
    for name in NEW:
        spec = FIELDS[name]
        assert spec.help.endswith(".") and len(spec.help) > 20, name
        assert spec.group == GROUPS_NOW.get(name, spec.group) and spec.group in ("position", "attention", "layers")
    for name, group in LATER.items():
        assert FIELDS[name].help.endswith(".") and len(FIELDS[name].help) > 20 and FIELDS[name].group == group, name
    assert "alibi" in FIELDS["position"].choices and "swiglu_clamped" in FIELDS["ffn"].choices
    assert FIELDS["rope_short_factor"].allowed() == ("a comma-separated list, each number > 0, or null "
                                                      "(not longrope)")


@pytest.mark.parametrize("name", CONFIGS)
def test_yaml_round_trip(name):
    cfg = CONFIGS[name]
    text = cfg.to_yaml()
    assert ModelConfig.from_yaml(text) == cfg
    assert all(f"{n}: " in text for n in LATER)
    if cfg.rope_short_factor:
        assert "rope_short_factor: [1.0, 1.015625, " in text   # a YAML flow list on one line, no tuple tag


@pytest.mark.parametrize("name", CONFIGS)
def test_url_round_trip(name):
    cfg = CONFIGS[name]
    params = state.url_params(cfg, "gpt2")
    assert all(isinstance(v, str) for v in params.values())
    preset, back, problems = state.config_from_params(params)
    assert (preset, back, problems) == ("gpt2", cfg, [])


@pytest.mark.parametrize("name", CONFIGS)
def test_editor_text_round_trip(name):
    """The sidebar shows floats and lists as text; what it shows parses back to the same value."""
    cfg = CONFIGS[name]
    raw = {n: state.widget_value(n, getattr(cfg, n)) for n in FIELDS}
    assert ModelConfig.from_dict(raw) == cfg


@pytest.mark.parametrize("name", CONFIGS)
def test_cli_flags_round_trip(name, capsys):
    cfg = CONFIGS[name]
    base = ModelConfig()
    flags = []
    for n in FIELDS:
        if getattr(cfg, n) != getattr(base, n):
            flags += ["--" + n.replace("_", "-"), state.to_url_value(getattr(cfg, n))]
    assert main(["export", *flags]) == 0
    assert ModelConfig.from_yaml(capsys.readouterr().out) == cfg


def test_bad_list_values_name_the_field(capsys):
    assert main(["export", "--position", "rope", "--layer-types", "full,diagonal"]) == 2
    err = capsys.readouterr().err
    assert "layer_types: " in err and "one of full, sliding" in err
    assert main(["export", "--position", "rope", "--rope-scaling", "longrope", "--rope-short-factor", "1,2"]) == 2
    err = capsys.readouterr().err
    assert "rope_short_factor: longrope needs rotary_dim/2 = 32 numbers, got 2 numbers" in err
