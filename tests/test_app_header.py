"""app.widgets.page_header: every page opens with its title and the current config's metric row."""
import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Block

from engine.budget.params import count_params
from engine.presets import PRESETS
from tests.helpers import APP_WAIT_S

METRICS = ["Total parameters", "Non-embedding", "Weights (bf16)", "KV cache, full context", "FLOPs / token"]


def _header_with_reference():
    from app.widgets import page_header
    from engine.presets import PRESETS
    page_header("Compare", PRESETS["gpt2"].config, reference=PRESETS["microgpt"].config)


def test_header_shows_title_metrics_and_deltas():
    at = AppTest.from_function(_header_with_reference, default_timeout=APP_WAIT_S).run()
    assert not at.exception and [t.value for t in at.title] == ["Compare"]
    assert [m.label for m in at.metric] == METRICS
    gpt2, micro = count_params(PRESETS["gpt2"].config).total, count_params(PRESETS["microgpt"].config).total
    assert at.metric[0].value == f"{gpt2:,}" and at.metric[0].delta == f"+{gpt2 - micro:,}"


@pytest.mark.parametrize("page, title", [("design", "Design: gpt2"), ("budgets", "Budgets: gpt2"),
                                         ("activations", "Activations: gpt2"), ("latency", "Latency: gpt2"),
                                         ("training", "Training: gpt2"), ("compare", "Compare"),
                                         ("lecture", "Lecture: worked examples")])
def test_every_page_opens_with_the_header(new_app, page, title):
    at = new_app(f"pages/{page}.py", preset="gpt2")
    at.run()
    assert not at.exception and at.title[0].value == title
    assert [m.label for m in at.metric][:5] == METRICS
    assert at.metric[0].value == f"{count_params(PRESETS['gpt2'].config).total:,}"


def test_metric_width_estimate_bounds_what_chromium_draws():
    """text_em sizes each metric row's font so the longest value fits its column; it must never be below the
    width Chromium draws in the metric font (measured at 36 px: 242 px, 224 px, 168 px and 140 px)."""
    from app.widgets import text_em
    for text, drawn_px in (("671,026,404,352", 242), ("46,702,792,704", 224), ("1.45 TFLOP", 168),
                           ("10.72 GiB", 140)):
        assert drawn_px / 36 <= text_em(text) <= 1.25 * drawn_px / 36, text


def _long_header():
    from app.widgets import page_header
    from engine.presets import PRESETS
    page_header("Design", PRESETS["deepseek-v3"].config)


def test_header_rows_counts_then_budgets():
    """Two rows of three columns: the parameter counts, then weights, KV cache and FLOPs per token."""
    at = AppTest.from_function(_long_header, default_timeout=APP_WAIT_S).run()
    assert not at.exception
    box = next(b for b in at.main.children.values() if isinstance(b, Block))   # the keyed container of the rows
    rows = [[m.label for m in row.get("metric")] for row in box.children.values()]
    assert rows == [["Total parameters", "Non-embedding", "Active / token"], METRICS[2:]]
    assert at.metric[0].value == "671,026,404,352"
