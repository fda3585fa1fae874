"""Real browser, issue 24's app side: `?preset=deepseek-v3.2` shows the lightning indexer in the Design page's
block diagram (the SVG image the page draws, read back from its data URL) and its key cache on Budgets' KV chart
as its own part (61 layers x 132 B a token), beside the latent cache and their sum."""
import base64

import pytest

from tests.browser_pages import settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LOAD = 60_000
CONTEXT = 163_840   # DeepSeek-V3.2's context_length
TRACES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => p.data.map(t => [t.name, t.y[t.y.length - 1], t.x[t.x.length - 1]]))"""
SVG_JS = """() => [...document.querySelectorAll('img')].map(i => i.src).filter(s => s.startsWith('data:image/svg+xml;base64,'))"""
GIB = 2 ** 30


def test_deepseek_v32_indexer_in_the_diagram_and_its_cache_in_budgets(served_app, browser):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{served_app}/design?preset=deepseek-v3.2")
    settle(page)
    page.wait_for_function(SVG_JS.replace("=> [", "=> 0 < [", 1) + ".length", timeout=LOAD)
    svgs = [base64.b64decode(src.split(",", 1)[1]).decode() for src in page.evaluate(SVG_JS)]
    svg = next(s for s in svgs if "lightning indexer" in s)
    for text in ("indexer wk (one key)", "FP8 + scale, 132 B", "keep the top 2,048 keys", "causal mask ∩ top 2,048"):
        assert text in svg, text

    page.goto(f"{served_app}/budgets?preset=deepseek-v3.2")
    settle(page)
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=LOAD)
    kv = {name: (y, x) for plot in page.evaluate(TRACES_JS) for name, y, x in plot}
    y, x = kv["part: indexer keys (FP8 + scale)"]   # the chart's unit is GiB at this size
    assert x == CONTEXT and round(y * GIB) == 61 * 132 * CONTEXT
    assert round(kv["part: MLA latent + rotary key"][0] * GIB) == 70_272 * CONTEXT
    assert round(kv["current (MLA)"][0] * GIB) == (70_272 + 61 * 132) * CONTEXT
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()
