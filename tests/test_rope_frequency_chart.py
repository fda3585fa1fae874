"""The rotation-frequency figure of the Design page: the engine's per-pair frequencies held against the textbook
formulas, and the figure builder (the Design page drawing it: tests/test_app_design.py)."""
import math

import pytest

from app.charts.design import rope_frequency_chart
from engine.layers.position import rope_frequency_profile, rope_scaling_text
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


def test_dynamic_grows_the_base_only_past_the_original_context():
    """NTK-aware: at T = 2 * L0 with s = 2 the base becomes base * (s*T/L0 - (s-1))^(r/(r-2)) = base * 3^(r/(r-2));
    up to L0 the frequencies stay plain (fp32 arithmetic, hence approx)."""
    cfg = PRESETS["llama-3-8b"].config.replace(rope_scaling="dynamic", rope_factor=2.0)
    r, L0 = cfg.rotary_dim, cfg.context_length
    original, scaled = rope_frequency_profile(cfg, L0)
    assert scaled == original
    original, scaled = rope_frequency_profile(cfg, 2 * L0)
    grown = cfg.rope_base * 3 ** (r / (r - 2))
    assert original == pytest.approx([cfg.rope_base ** (-2 * i / r) for i in range(r // 2)], rel=1e-6)
    assert scaled == pytest.approx([grown ** (-2 * i / r) for i in range(r // 2)], rel=1e-5)


def test_figure_has_both_curves_and_units():
    original, scaled = rope_frequency_profile(LLAMA31, 131072)
    fig = rope_frequency_chart(original, scaled, "llama3", 131072)
    assert [list(t.y) for t in fig.data] == [original, scaled]
    assert "131,072 tokens" in fig.data[1].name
    assert "radians per token" in fig.layout.yaxis.title.text and fig.layout.yaxis.type == "log"
    assert "dimension pair" in fig.layout.xaxis.title.text


@pytest.mark.parametrize("preset,scaling,says", [
    ("llama-3-8b", "none", "No RoPE scaling: every pair keeps the frequency it was trained with"),
    ("llama-3-8b", "linear", "Linear scaling divides every pair's frequency by 4, so 8,192 tokens stay within the "
                             "angles seen in 2,048-token training."),
    ("llama-3-8b", "dynamic", "Dynamic (NTK) scaling raises theta once a sequence passes 2,048 tokens"),
    ("llama-3.1-8b", "llama3", "Llama 3 scaling divides the slow pairs (wavelength above 8,192 tokens) by 8, keeps "
                               "the fast ones (below 2,048)"),
    ("deepseek-v3", "yarn", "YaRN keeps the pairs that turn more than 32 times over 4,096 tokens, divides those "
                            "turning less than once by 40"),
    ("phi-3.5-mini", "longrope", "the short factors up to 4,096 tokens, the long ones beyond (at 131,072 tokens, "
                                 "the long ones)"),
])
def test_the_caption_says_what_each_scaling_does(preset, scaling, says):
    """The Design page's caption under the chart, one sentence per kind (it read "scaling (none) slows some of
    them…" whatever the kind, none included)."""
    cfg = PRESETS[preset].config
    if scaling in ("linear", "dynamic"):
        cfg = cfg.replace(rope_scaling=scaling, rope_factor=4.0, rope_original_context=2048)
    assert cfg.rope_scaling == scaling
    text = rope_scaling_text(cfg, cfg.context_length)
    assert says in text and text[0].isupper() and text.endswith(".") and "(none)" not in text
    if scaling == "none":
        assert "slow" not in text
