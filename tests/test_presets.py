"""Every preset's closed-form count equals its published reference and its meta-built model; the reference
facts of DESIGN.md and the lecture seeds, reproduced."""
from __future__ import annotations

import pytest
import torch

from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.model import DecoderLM
from engine.presets import PRESETS, get_preset


@pytest.mark.parametrize("name", PRESETS)
def test_preset_count_equals_reference_and_built_model(name):
    preset = PRESETS[name]
    count = count_params(preset.config)
    assert count.total == preset.reference_params
    with torch.device("meta"):
        model = DecoderLM(preset.config)
    assert sum(p.numel() for p in model.parameters()) == preset.reference_params
    assert preset.source and preset.config.name == name


def test_at_least_the_issue_presets_exist():
    required = {"gpt2": 124_439_808, "gpt2-medium": None, "llama-2-7b": 6_738_415_616,
                "llama-3-8b": 8_030_261_248, "llama-3-70b": None, "mistral-7b": 7_241_732_096,
                "qwen2.5-0.5b": None, "gemma-2-2b": None, "falcon-7b": None, "microgpt": 4_224,
                "nanogpt-handout": 1_872}
    assert len(PRESETS) >= 12 and set(required) <= set(PRESETS)
    assert any(n.startswith("pythia") for n in PRESETS) and any(n.startswith(("phi", "olmo")) for n in PRESETS)
    for name, reference in required.items():
        assert reference is None or PRESETS[name].reference_params == reference


def test_nanogpt_handout_tied_vs_untied_differ_by_exactly_60():
    cfg = get_preset("nanogpt-handout").config
    tied, untied = count_params(cfg), count_params(cfg.replace(tie_embeddings=False))
    assert (tied.total, untied.total) == (1_872, 1_932)
    assert untied.total - tied.total == tied.tying_saves == 5 * 12


def test_microgpt_matches_the_hand_count():
    c = count_params(get_preset("microgpt").config).components
    # token embedding 28x16, positions 16x16, head 28x16, attention 4 x 16x16, MLP 16x64 + 64x16, no norm gains
    assert (c["token_embedding"], c["positions"], c["output_head"]) == (448, 256, 448)
    assert c["attention_q"] + c["attention_k"] + c["attention_v"] + c["attention_o"] == 1_024
    assert c["ffn"] == 2_048 and c["norms"] == 0
    assert sum(c.values()) == 4_224


def test_gpt2_without_biases():
    cfg = get_preset("gpt2").config.replace(bias=False, norm_bias=False)
    assert count_params(cfg).total == 124_337_664


def test_dense_3072_and_gated_2048_have_the_same_ffn_matrices_at_d768():
    base = ModelConfig(bias=False, n_layers=1)
    dense = count_params(base.replace(ffn="gelu", d_ff=3072)).components["ffn"]
    gated = count_params(base.replace(ffn="swiglu", d_ff=2048)).components["ffn"]
    assert dense == gated == 4_718_592
    assert count_params(base.replace(ffn="swiglu", d_ff=3072)).components["ffn"] == 7_077_888
    with_bias = count_params(base.replace(ffn="gelu", d_ff=3072, bias=True)).components["ffn"]
    assert with_bias - dense == 3_072 + 768                                  # the handout's 3,840


def test_tying_at_v32000_d768_saves_24_576_000():
    cfg = ModelConfig(vocab_size=32_000, d_model=768)
    assert count_params(cfg).tying_saves == 24_576_000
    assert count_params(cfg.replace(tie_embeddings=False)).total - count_params(cfg).total == 24_576_000


def test_unknown_preset_lists_the_names():
    with pytest.raises(KeyError, match="preset: 'gpt3' is not one of gpt2, gpt2-medium"):
        get_preset("gpt3")
