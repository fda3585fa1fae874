"""Budgets: Measure runs at the page's batch and sequence (or says what it capped), the memory chart names the
optimizer, and roofline labels stay inside the plot."""
import math

import pytest

from app import budget_measure
from app.charts import budgets as budget_charts
from engine.budget.activations import activation_estimate
from engine.budget.devices import DEVICE_PROFILES, roofline
from engine.budget.flops import flops_budget
from engine.budget.memory import POLICIES, memory_budget
from engine.presets import get_preset
from engine.units import fmt_bytes, fmt_flops

LLAMA = get_preset("llama-3-8b").config


def test_measure_sizes_keep_the_page_values_or_say_what_was_capped():
    assert budget_measure.measure_sizes(2, 1024, "cpu") == (2, 1024, None)
    assert budget_measure.measure_sizes(64, 2048, "cuda") == (64, 2048, None)
    b, s, note = budget_measure.measure_sizes(8, 2048, "cpu")
    assert (b, s) == (2, 2048) and b * s <= budget_measure.MEASURE_MAX_TOKENS
    assert "batch 2 x sequence 2,048 instead of the page's 8 x 2,048" in note and "4,096 tokens" in note
    b, s, note = budget_measure.measure_sizes(1, 8192, "cpu")
    assert (b, s) == (1, 4096) and "1 x 8,192" in note


def test_memory_axis_names_the_chosen_optimizer():
    train = {p: memory_budget(LLAMA, 1, 128, "bf16", p, "sgd") for p in POLICIES}
    fig = budget_charts.memory_figure(train, memory_budget(LLAMA, 1, 128), "inference (bf16)", "sgd")
    assert fig.layout.xaxis.title.text.startswith("training precision policy (plain SGD: no state, one step)")
    fig = budget_charts.memory_figure(train, memory_budget(LLAMA, 1, 128), "inference (bf16)", "adamw")
    assert "AdamW: 2 states" in fig.layout.xaxis.title.text


@pytest.mark.parametrize("batch", [1, 8, 512])
def test_roofline_labels_never_collide(batch):
    """Texts beside the markers lay on the roof line and on the ridge's label: the points carry their verdict in
    the legend, and the one text on the plot, the ridge's, sits above the roof's corner, growing away from the
    nearer edge."""
    points = roofline(LLAMA, "H100", batch, 2048)
    fig = budget_charts.roofline_figure(DEVICE_PROFILES["H100"], points, "bf16")
    by_name = {t.name: t for t in fig.data}
    for phase, p in points.items():
        marker = by_name[f"{phase}: {p.bound}-bound"]
        assert marker.mode == "markers" and marker.text is None
    assert all(t.text is None or not any(t.text) for t in fig.data)
    (ridge,) = fig.layout.annotations
    lo, hi = fig.layout.xaxis.range
    assert ridge.text == "ridge 295 FLOP/B" and ridge.yanchor == "bottom" and lo <= ridge.x <= hi
    assert ridge.xanchor == ("right" if ridge.x > lo + 0.6 * (hi - lo) else "left")
    assert fig.layout.yaxis.range[1] > math.log10(989.4e12) == pytest.approx(ridge.y)   # room above the peak


def test_budgets_page_measures_at_its_batch_and_sequence(new_app):
    at = new_app("pages/budgets.py", preset="nanogpt-handout")
    at.run()
    at.number_input(key="b_batch").set_value(3).run()
    at.number_input(key="b_seq").set_value(2).run()
    assert any("at batch 3, sequence 2 in" in c.value for c in at.caption)
    at.button(key="b_measure").click().run()
    assert not at.exception and not at.error and not at.warning
    table = at.dataframe[-1].value.set_index("quantity")
    cfg = get_preset("nanogpt-handout").config
    expected = activation_estimate(cfg, 3, 2, "bf16", "sdpa").total
    assert table.loc["activation bytes", "estimate (closed form)"] == fmt_bytes(expected)
    assert table.loc["forward FLOPs", "estimate (closed form)"] == fmt_flops(flops_budget(cfg, 3, 2).forward_flops)
