"""Real browser, issue 23's app acceptance: `?preset=qwen3-next-80b-a3b` shows 79,674,391,296 whole, the layer map
on Design (a plotted strip and the diagram's strip) and Budgets' memory-vs-context chart with the attention layers'
KV, the flat state and the every-mixer-attention line. Values are read from the drawn Plotly figures."""
import pytest

from engine.budget.context_memory import all_attention, context_memory
from engine.presets import PRESETS
from tests.browser_pages import settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LOAD = 60_000
TRACES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => p.data.map(t => [t.name, t.x, t.y]))"""
GIB = 2 ** 30
QWEN = PRESETS["qwen3-next-80b-a3b"].config


def traces(page) -> dict[str, tuple[list, list]]:
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=LOAD)
    return {name: (x, y) for plot in page.evaluate(TRACES_JS) for name, x, y in plot}


def test_qwen3_next_layer_map_total_and_memory_chart(served_app, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{served_app}/?preset=qwen3-next-80b-a3b")
    settle(page)
    page.get_by_test_id("stMetricValue").filter(has_text="79,674,391,296").first.wait_for(timeout=LOAD)
    page.get_by_role("heading", name="Layer map").first.wait_for(timeout=LOAD)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=LOAD)
    drawn = traces(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    x, _ = next(v for k, v in drawn.items() if k.startswith("mixer: softmax attention (full)"))
    assert list(x) == list(range(4, 49, 4))
    page.wait_for_selector('[data-testid="stImage"] img', timeout=LOAD)   # the block diagram (its strip: DOT tests)
    page.screenshot(path=str(tmp_path / "design.png"), full_page=True)

    page.goto(f"{served_app}/budgets?preset=qwen3-next-80b-a3b&replica_gpus=2")
    settle(page)
    page.get_by_role("heading", name="Inference memory vs context").first.wait_for(timeout=LOAD)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=LOAD)
    drawn = traces(page)
    x, kv = drawn["KV cache (attention layers)"]
    want = context_memory(QWEN, tuple(x))
    assert [round(v * GIB) for v in kv] == list(want.kv) and x[-1] == QWEN.context_length
    _, state = drawn["recurrent + conv state"]
    assert {round(v * GIB) for v in state} == {want.state}
    _, dense = drawn["same model, every mixer attention"]
    assert [round(v * GIB) for v in dense] == list(context_memory(all_attention(QWEN), tuple(x)).totals)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(tmp_path / "budgets.png"), full_page=True)
    page.close()
