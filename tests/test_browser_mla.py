"""Real browser, the acceptance of issue 12's app side: `?preset=deepseek-v3` shows 671,026,404,352 whole (never
cut with an ellipsis) and the MLA KV curve, on Budgets' KV chart and in the Lecture section "MLA: cache the
latent, not the heads". The curves are read from the drawn Plotly figures (each .js-plotly-plot holds its data)."""
import pytest

from tests.browser_pages import settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
CONTEXT = 163_840   # DeepSeek-V3's context_length
TRACES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => p.data.map(t => [t.name, t.y[t.y.length - 1], t.x[t.x.length - 1]]))"""
WHOLE_JS = """(text) => [...document.querySelectorAll('[data-testid="stMetricValue"]')].filter(v => v.innerText.trim() === text)
    .map(v => { const box = v.querySelector('[data-testid="stMarkdownContainer"]'); return box.scrollWidth <= box.clientWidth; })"""
GIB = 2 ** 30


def curves(page) -> dict[str, tuple[float, int]]:
    """Every drawn line by name: (last y, last x)."""
    page.wait_for_selector(".js-plotly-plot .main-svg")
    return {name: (y, x) for plot in page.evaluate(TRACES_JS) for name, y, x in plot}


def test_deepseek_v3_total_whole_and_mla_kv_curves(served_app, browser):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{served_app}/budgets?preset=deepseek-v3")
    settle(page)
    assert page.evaluate(WHOLE_JS, "671,026,404,352") == [True]
    kv = curves(page)
    y, x = kv["current (MLA)"]   # the chart's unit is GiB at this size
    assert x == CONTEXT and round(y * GIB) == 70_272 * CONTEXT
    y, _ = kv["MLA, expanded per-head K/V"]
    assert round(y * GIB) == 61 * 128 * (192 + 128) * 2 * CONTEXT

    page.goto(f"{served_app}/lecture?section=mla&preset=deepseek-v3")
    page.get_by_role("heading", name="MLA: cache the latent, not the heads", exact=False).first.wait_for()
    for text in ("671,026,404,352", "68.62 KiB/token"):   # the page streams in: wait for both rows
        page.get_by_test_id("stMetricValue").filter(has_text=text).first.wait_for()
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
    assert page.evaluate(WHOLE_JS, "671,026,404,352") == [True]
    assert page.evaluate(WHOLE_JS, "68.62 KiB/token") == [True]   # 70,272 bytes
    lines = curves(page)
    y, x = lines["MLA latent: 68.62 KiB/token"]
    assert x == CONTEXT and round(y * GIB) == 70_272 * CONTEXT
    assert {"MHA: 3.81 MiB/token", "MQA: 30.50 KiB/token", "MLA expanded: 4.77 MiB/token"} <= set(lines)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()
