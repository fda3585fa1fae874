"""AppTest: Budgets, Activations and Compare render, react to knobs and refuse big builds with a message."""
import pytest

from app.export import CHART_DOWNLOAD
from engine.budget.params import count_params
from engine.presets import PRESETS


def total(at) -> str:
    return next(m.value for m in at.metric if m.label == "Total parameters")


def test_budgets_renders_and_follows_knobs(new_app):
    at = new_app("pages/budgets.py", preset="llama-3-8b")
    at.run()
    assert not at.exception and not at.error
    assert at.title[0].value == "Budgets: llama-3-8b"
    at.sidebar.text_input(key="field_n_layers").input("8").run()
    assert total(at) == f"{count_params(PRESETS['llama-3-8b'].config.replace(n_layers=8)).total:,}"
    at.number_input(key="b_seq").set_value(512).run()
    assert not at.exception and at.number_input(key="b_seq").value == 512


def test_budgets_measure_refuses_big_model_with_numbers(new_app):
    at = new_app("pages/budgets.py", preset="llama-3-8b")
    at.run()
    at.button(key="b_measure").click().run()
    assert not at.exception
    assert any("8,030,261,248 parameters" in w.value for w in at.warning) and not at.error   # a warning, not an error
    table = at.dataframe[-1].value
    assert list(table["quantity"]) == ["forward FLOPs", "backward FLOPs"]   # meta-device count still runs


def test_budgets_measure_small_model(new_app):
    at = new_app("pages/budgets.py", preset="nanogpt-handout")
    at.run()
    said = [c.value for c in at.caption if c.value.startswith("Estimated duration:")]   # before it starts
    assert len(said) == 1 and "two model builds" in said[0], said
    at.button(key="b_measure").click().run()
    assert not at.exception and not at.error
    table = at.dataframe[-1].value
    assert {"forward FLOPs", "activation bytes", "KV-cache bytes"} <= set(table["quantity"])
    assert all(e.endswith("%") for e in table["error"])


def test_activations_live_stats_small_and_refusal(new_app):
    at = new_app("pages/activations.py", preset="microgpt")
    at.run()
    assert not at.exception
    next(b for b in at.button if b.label == "Build and measure").click().run()
    assert not at.exception and not at.error
    assert at.number_input(key="map_head").value == 0
    at.sidebar.selectbox(key="preset_pick").set_value("llama-3-8b").run()
    assert not at.exception
    assert any("8,030,261,248 parameters" in e.value for e in at.error)


def test_compare_pins_and_invalid_value(new_app):
    at = new_app("pages/compare.py")
    at.run()
    assert not at.exception
    assert [p[0] for p in at.session_state["pins"]] == ["gpt2 (current)", "llama-3-8b"]
    assert next(m for m in at.metric if m.label == "Total parameters").delta == "same"   # no "+0" against itself
    at.selectbox(key="cmp_preset").set_value("mistral-7b").run()
    next(b for b in at.button if b.label == "Pin this preset").click().run()
    assert [p[0] for p in at.session_state["pins"]][-1] == "mistral-7b"
    at.sidebar.text_input(key="field_n_layers").input("6").run()
    assert not at.exception
    delta = next(m for m in at.metric if m.label == "Total parameters").delta
    assert delta == f"-{count_params(PRESETS['gpt2'].config).total - count_params(PRESETS['gpt2'].config.replace(n_layers=6)).total:,}"


def test_every_page_survives_an_invalid_value(new_app):
    for page in ("pages/design.py", "pages/budgets.py", "pages/activations.py", "pages/compare.py"):
        at = new_app(page, preset="gpt2")
        at.run()
        at.sidebar.text_input(key="field_n_kv_heads").input("5").run()
        assert not at.exception, page
        assert any(e.value.startswith("n_kv_heads:") for e in at.sidebar.error), page
        assert total(at) == "124,439,808", page


@pytest.mark.parametrize("page,preset,clicks", [
    ("pages/design.py", "gpt2", ()), ("pages/budgets.py", "gpt2", ()),
    ("pages/activations.py", "microgpt", ("Build and measure",)), ("pages/compare.py", "gpt2", ()),
])
def test_every_chart_has_an_offline_html_download(new_app, page, preset, clicks):
    at = new_app(page, preset=preset)
    at.run()
    for label in clicks:
        next(b for b in at.button if b.label == label).click().run()
    assert not at.exception
    charts = at.main.get("plotly_chart")     # AppTest sees Plotly charts only as unknown elements: count them
    downloads = [b for b in at.main.get("download_button") if b.proto.label == CHART_DOWNLOAD]
    assert len(charts) >= (4 if page == "pages/activations.py" else 1), page
    assert len(downloads) == len(charts), page
