"""The rotation-frequency figure of the Design page: the engine's per-pair frequencies held against the textbook
formulas, the figure builder, and the page drawing it for a RoPE config."""
import math

import pytest

from app.charts.design import rope_frequency_chart
from engine.layers.position import rope_frequency_profile
from engine.presets import PRESETS

LLAMA31 = PRESETS["llama-3.1-8b"].config   # llama3 scaling: factor 8, original context 8,192, low 1, high 4


def test_unscaled_frequencies_are_base_to_the_minus_2i_over_r():
    cfg = PRESETS["llama-3-8b"].config
    original, scaled = rope_frequency_profile(cfg, 8192)
    r = cfg.rotary_dim
    assert original == scaled
    assert original == pytest.approx([cfg.rope_base ** (-2 * i / r) for i in range(r // 2)], rel=1e-6)


def test_linear_scaling_divides_every_frequency_by_the_factor():
    original, scaled = rope_frequency_profile(LLAMA31.replace(rope_scaling="linear", rope_factor=4.0), 4096)
    assert scaled == pytest.approx([w / 4 for w in original], rel=1e-6)


def test_llama3_keeps_fast_pairs_and_slows_slow_ones_by_the_factor():
    """Meta's rule: wavelengths under 8,192/4 tokens unchanged, over 8,192/1 divided by 8, smooth between."""
    original, scaled = rope_frequency_profile(LLAMA31, LLAMA31.context_length)
    for w, v in zip(original, scaled):
        wavelength = 2 * math.pi / w
        if wavelength < 8192 / 4:
            assert v == pytest.approx(w, rel=1e-6)
        elif wavelength > 8192 / 1:
            assert v == pytest.approx(w / 8, rel=1e-6)
        else:
            assert w / 8 < v < w


def test_figure_has_both_curves_and_units():
    original, scaled = rope_frequency_profile(LLAMA31, 131072)
    fig = rope_frequency_chart(original, scaled, "llama3", 131072)
    assert [list(t.y) for t in fig.data] == [original, scaled]
    assert "131,072 tokens" in fig.data[1].name
    assert "radians per token" in fig.layout.yaxis.title.text and fig.layout.yaxis.type == "log"
    assert "dimension pair" in fig.layout.xaxis.title.text


def test_design_page_draws_it_for_rope_only(new_app):
    at = new_app(preset="llama-3.1-8b")
    at.run()
    assert not at.exception
    assert "RoPE rotation frequencies" in [h.value for h in at.subheader]
    at = new_app(preset="gpt2")
    at.run()
    assert "RoPE rotation frequencies" not in [h.value for h in at.subheader]
