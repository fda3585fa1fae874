"""norm_bias follows the norm unless set: null = LayerNorm with a shift, RMSNorm without; one resolved value
(engine.layers.norm.has_bias) feeds the layers and the closed form, the same through YAML and the CLI."""
import json

import pytest

from engine.budget.params import count_params
from engine.layers.norm import has_bias
from engine.cli import main
from engine.config import ConfigError, ModelConfig
from engine.model import build_model

GPT2 = 124_439_808
NORMS = 2 * 12 + 1   # two per block and the final norm, each of width 768


def test_gpt2_to_rmsnorm_and_back_restores_the_reference_count():
    gpt2 = ModelConfig()
    assert gpt2.norm_bias is None and has_bias(gpt2)
    rms = gpt2.replace(norm="rmsnorm")
    assert not has_bias(rms)
    assert count_params(rms).total == GPT2 - NORMS * 768
    assert count_params(rms.replace(norm="layernorm")).total == GPT2


@pytest.mark.parametrize("norm,norm_bias,biases", [("layernorm", None, True), ("layernorm", False, False),
                                                    ("layernorm", True, True), ("rmsnorm", None, False),
                                                    ("rmsnorm", False, False)])
def test_built_norms_match_the_resolved_value(norm, norm_bias, biases):
    cfg = ModelConfig(vocab_size=11, context_length=8, d_model=8, n_layers=1, n_heads=2, norm=norm,
                      norm_bias=norm_bias)
    model = build_model(cfg, device="meta")
    norm_biases = [n for n, _ in model.named_parameters() if "norm" in n and n.endswith(".bias")]
    assert bool(norm_biases) is biases
    assert sum(p.numel() for p in model.parameters()) == count_params(cfg).total


def test_explicit_bias_on_rmsnorm_is_still_refused():
    with pytest.raises(ConfigError, match="norm_bias: rmsnorm has no bias"):
        ModelConfig(norm="rmsnorm", norm_bias=True)


def test_yaml_null_and_missing_follow_the_norm():
    assert has_bias(ModelConfig.from_yaml("norm: rmsnorm\n")) is False
    assert has_bias(ModelConfig.from_yaml("norm: layernorm\nnorm_bias: null\n")) is True
    cfg = ModelConfig(norm="rmsnorm")
    assert ModelConfig.from_yaml(cfg.to_yaml()) == cfg and "norm_bias: null" in cfg.to_yaml()


def test_cli_params_norm_rmsnorm_on_the_default_config(capsys):
    assert main(["params", "--norm", "rmsnorm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total_params"] == GPT2 - NORMS * 768
    assert main(["params", "--norm", "rmsnorm", "--norm-bias", "true"]) == 2
    assert "norm_bias: rmsnorm has no bias" in capsys.readouterr().err
