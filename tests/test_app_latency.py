"""Latency page (AppTest, tiny preset): sweep with results table, decode curves, refusal with numbers; and its
figure builders (log axes, units)."""
from __future__ import annotations

import re

import pytest

from app import latency_plan
from app.charts import latency as latency_charts
from engine.measure.decode import DecodePoint
from engine.measure.latency import LatencyResult


def result(batch: int, seq: int, ms: float) -> LatencyResult:
    return LatencyResult("t", "forward", "cpu", "fp32", batch, seq, ms, ms / 10, 5, batch * seq / ms * 1e3, 1e6,
                         1e6 / ms * 1e3 / 1e12, 0.01, "CPU (measured)", None)


def test_latency_and_throughput_figures():
    rs = [result(4, 64, 2.0), result(1, 64, 1.0), result(1, 16, 0.5)]
    fig = latency_charts.latency_figure(rs)
    assert [t.name for t in fig.data] == ["batch 1", "batch 4"]
    assert list(fig.data[0].x) == [16, 64] and list(fig.data[0].y) == [0.5, 1.0]
    assert fig.data[0].customdata[1][0] == 0.1 and fig.data[0].error_y.array is None   # IQR in the hover
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    assert list(fig.layout.xaxis.tickvals) == [16, 64] and fig.layout.yaxis.tickformat == ",~g"
    assert list(fig.layout.yaxis.tickvals) == [0.5, 1.0, 1.5, 2.0, 2.5]      # 0.5..2 ms: under a decade, round steps
    tp = latency_charts.throughput_figure([result(1, 32, 110.0), result(1, 128, 327.0)]).layout.yaxis   # 291..391
    assert list(tp.tickvals) == [250, 300, 350, 400] and tp.type == "log"
    assert latency_charts.latency_figure(rs + [result(1, 256, 40.0)]).layout.yaxis.dtick == "D2"   # 1, 2, 5 per decade
    assert "ms" in fig.layout.yaxis.title.text and "tokens" in fig.layout.xaxis.title.text
    tp = latency_charts.throughput_figure(rs)
    assert "tokens/s" in tp.layout.yaxis.title.text and list(tp.data[1].y) == [rs[0].tokens_per_s]


def test_decode_figure_one_line_per_variant():
    pts = [DecodePoint(16, 1.0, 0.1, 1000.0, 2**20), DecodePoint(256, 2.0, 0.1, 500.0, 2**24)]
    fig = latency_charts.decode_figure({"MHA": pts, "MQA": pts[:1]})
    assert [t.name for t in fig.data] == ["MHA", "MQA"] and list(fig.data[0].x) == [16, 256]
    assert fig.layout.title.text == "Decode step vs context: MHA, MQA"          # no GQA curve, none named
    assert list(fig.layout.xaxis.ticktext) == ["16", "256"]
    assert fig.layout.xaxis.type == "log" and "ms per token" in fig.layout.yaxis.title.text
    assert fig.data[0].customdata[1][0] == 16.0        # MiB in the hover


def test_page_sweeps_and_decodes_a_tiny_model(new_app, monkeypatch):
    monkeypatch.setattr(latency_plan, "DECODE_BUDGET_S", 0.5)       # time budgets of a second, not the defaults
    at = new_app("pages/latency.py", preset="microgpt")
    at.run()
    assert not at.exception and at.title[0].value == "Latency: microgpt"
    at.number_input(key="lat_budget").set_value(1.0).run()
    at.button(key="lat_run").click().run()
    assert not at.exception and not at.error
    key, results = at.session_state["lat_sweep"]
    assert [(r.batch, r.seq) for r in results] == [(1, 8), (1, 16), (4, 8), (4, 16)]
    table = at.dataframe[-1].value
    assert list(table["peak memory (measured)"]) == ["not available on CPU"] * 4
    assert list(table["estimate error"]) == ["—"] * 4 and all(t.endswith("FLOP/s") for t in table["achieved"])
    assert not [b for b in at.button if b.key == "lat_stop"]          # Stop goes away with the finished sweep
    at.button(key="lat_decode").click().run()
    assert not at.exception and not at.error
    _, curves = at.session_state["lat_decode_curves"]
    assert list(curves) == ["MHA", "MQA"] and [p.context for p in curves["MQA"]] == [1, 2, 4, 8]


def test_page_refuses_a_model_that_does_not_fit(new_app):
    at = new_app("pages/latency.py", preset="llama-3-70b")
    at.run()
    assert not at.exception
    assert any("refusing to build llama-3-70b" in e.value and "free" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "lat_run"]


@pytest.mark.browser
@pytest.mark.slow
def test_browser_sweep_draws_charts(served_app, browser):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{served_app}/latency?preset=microgpt")
    page.get_by_role("button", name="Measure the sweep").click()
    page.wait_for_selector(".js-plotly-plot")
    page.get_by_text("Peak memory is measured on CUDA only").first.wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()


def test_page_shows_the_estimate_before_timing_and_the_spread_after(new_app):
    at = new_app("pages/latency.py", preset="microgpt")
    at.run()
    assert any(c.value.startswith("Estimated duration: **") and "time budget 20 s" in c.value for c in at.caption)
    assert sum("Estimated duration" in c.value for c in at.caption) == 2          # the sweep and the decode chart
    at.number_input(key="lat_budget").set_value(1.0).run()
    at.button(key="lat_run").click().run()
    table = at.dataframe[-1].value
    assert all(re.fullmatch(r"\d+%|noisy \(\d+%\)", v) for v in table["IQR / median"])
    assert all(v.endswith("%") for v in table["MFU"])             # conftest's pinned peak: far above this CPU


def test_a_budget_the_rounds_cannot_keep_is_explained_before_measuring(new_app):
    """A 1 s budget over a sweep whose five rounds take longer: the estimate says why it exceeds the budget."""
    at = new_app("pages/latency.py", preset="gpt2", batches="1", seqs="1024", budget="1")
    at.run()
    said = " ".join(c.value for c in at.caption)
    assert not at.exception and "Estimated duration:" in said
    assert "5 rounds of ≈" in said and "a 1.0 s time budget cannot end it sooner" in said


def test_a_decode_comparison_that_cannot_fit_is_refused_before_its_button(new_app):
    """Too big to build: the page said so only after a click, having offered an estimate (5,060 s for
    llama-3-8b on this CPU) for a run that would be refused. Now the refusal, with its numbers, and no button."""
    at = new_app("pages/latency.py", preset="deepseek-v3")
    at.run()
    assert not at.exception
    refusals = [e.value for e in at.error if e.value.startswith("refusing to build")]
    assert len(refusals) == 2 and "seq=1025" in refusals[1]           # the sweep's, then the decode's
    assert not any(b.key == "lat_decode" for b in at.button)
    assert not any("Estimated duration" in c.value for c in at.caption)
