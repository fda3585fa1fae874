"""app.widgets.page_header: every page opens with its title and the current config's metric row."""
import pytest
from streamlit.testing.v1 import AppTest

from engine.budget.params import count_params
from engine.presets import PRESETS

METRICS = ["Total parameters", "Non-embedding", "Weights (bf16)", "KV cache, full context", "FLOPs / token"]


def _header_with_reference():
    from app.widgets import page_header
    from engine.presets import PRESETS
    page_header("Compare", PRESETS["gpt2"].config, reference=PRESETS["microgpt"].config)


def test_header_shows_title_metrics_and_deltas():
    at = AppTest.from_function(_header_with_reference).run()
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
