"""Offline exports: standalone chart HTML with plotly.js inlined, and the config handout (Markdown / HTML)."""
import re
import shutil

import plotly.graph_objects as go
import pytest

from app import export
from app.charts.lecture import marked_activations_figure
from engine.budget.memory import memory_budget
from engine.config import ModelConfig
from engine.lecture import dense_activation_table
from engine.presets import get_preset
from engine.units import fmt_bytes


@pytest.fixture(scope="module")
def chart_page():
    return export.figure_html(marked_activations_figure(dense_activation_table()))


def test_chart_html_is_offline(chart_page):
    assert '<script src="http' not in chart_page
    assert not re.search(r"<script[^>]*\bsrc=", chart_page)          # no external script of any kind
    assert export.external_references(chart_page) == []
    assert "Plotly.newPlot" in chart_page and "plotly.js v" in chart_page   # the library itself is inlined
    assert len(chart_page) > 1_000_000


def test_offline_checker_flags_a_cdn_page():
    cdn = go.Figure(go.Bar(x=[1], y=[2])).to_html(include_plotlyjs="cdn")
    refs = export.external_references(cdn)
    assert refs and "cdn.plot.ly" in cdn
    assert export.external_references('<link rel="stylesheet" href="//fonts.example/x.css">')


@pytest.fixture(scope="module")
def gpt2():
    return get_preset("gpt2").config


def test_handout_markdown_has_table_budgets_diagram_and_yaml(gpt2):
    md = export.handout_markdown(gpt2)
    assert md.startswith("# gpt2: architecture handout")
    for title in ("## Configuration", "## Parameters", "## Memory", "## Compute", "## Diagram", "## Config YAML"):
        assert title in md
    assert "| **total** | **124,439,808** |" in md
    mem = memory_budget(gpt2, 1, 1024)
    assert f"| KV cache | {fmt_bytes(mem.kv_cache_bytes)} |" in md
    assert "```dot\ndigraph model {" in md
    yaml_text = md.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert ModelConfig.from_yaml(yaml_text) == gpt2                    # the handout reproduces the config


def test_handout_follows_the_budget_settings(gpt2):
    md = export.handout_markdown(gpt2, batch=4, seq=256, policy="fp32", optimizer="sgd")
    mem = memory_budget(gpt2, 4, 256, policy="fp32", optimizer="sgd")
    assert f"| **training total** | {fmt_bytes(mem.train_total_bytes)} |" in md
    assert "batch 4, sequence 256" in md


def test_handout_html_is_one_offline_file(gpt2):
    page = export.handout_html(gpt2)
    assert export.external_references(page) == [] and '<script src="http' not in page
    assert "<table>" in page and "124,439,808" in page
    if shutil.which("dot"):
        assert "<svg" in page and "token embedding" in page
    else:
        assert "digraph model" in page


def test_handout_html_falls_back_to_dot_source(monkeypatch):
    monkeypatch.setattr(export.shutil, "which", lambda name: None)
    assert export.dot_to_svg("digraph { a -> b }") is None
    page = export.handout_html(get_preset("microgpt").config)
    assert "<svg" not in page and "digraph model {" in page and "4,224" in page


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_dot_to_svg_renders_locally():
    svg = export.dot_to_svg('digraph { a [label="hello"]; a -> b }')
    assert svg.startswith("<svg") and "hello" in svg
    assert export.dot_to_svg("digraph { a -> }") is None                # a DOT syntax error is not an SVG
