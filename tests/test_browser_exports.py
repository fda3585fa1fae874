"""Real browser: every offline export the app offers opens from a file:// URL with zero network requests, and a
crafted config name in it stays text (no link, no image).

Each export is built by the function its download button calls (app.export.figure_html for every chart's "Chart
as offline HTML", app.export.handout_html for the Lecture page's handout, the Trade-offs page's two charts through
the same figure_html), written to a temporary file and opened in Debian's Chromium. Anything that is not the file
itself (file:, data:, blob:, about:) is aborted and recorded, loopback included: an offline file has nothing to ask
any server for.
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from app import export
from app import sweep_view as view
from app.charts import sweep as sweep_charts
from app.charts.compare import compare_bars
from engine.config import ModelConfig
from engine.sweep import METRICS

pytestmark = [pytest.mark.browser, pytest.mark.slow]
# Markdown link and image (the handout), an HTML image, and the one tag Plotly itself turns into a live link
CRAFTED = ("[x](http://evil.example/p) ![i](http://evil.example/t.png) <img src=http://evil.example/a.png> "
           '<a href="http://evil.example/l">l</a>')
IN_FILE = ("file", "data", "blob", "about")
# every <a>, <img>, SVG <image>, <script>, <link>, <iframe> whose attributes (href, xlink:href, src) hold the name
FROM_NAME = """() => [...document.querySelectorAll('*')]
  .filter(e => ['a', 'img', 'image', 'script', 'link', 'iframe'].includes(e.localName.toLowerCase()))
  .filter(e => [...e.attributes].some(a => a.value.includes('evil.example')))
  .map(e => e.outerHTML.slice(0, 300))"""


def open_offline(browser, path: Path, ready: str):
    """Open `path` with every request beyond the file aborted; wait for the load event and a quiet network, fail
    naming any request it tried (a chart whose plotly.js was not inlined never draws), then wait for `ready`."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    attempted: list[str] = []

    def route(r) -> None:
        if urlsplit(r.request.url).scheme in IN_FILE:
            r.continue_()
        else:
            attempted.append(r.request.url)
            r.abort()

    page.context.route("**/*", route)
    page.on("request", lambda req: None if urlsplit(req.url).scheme in IN_FILE else attempted.append(req.url))
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_load_state("networkidle")
    # fonts and images a late layout pass asks for: wait until the document has them all
    page.wait_for_function("document.fonts.status === 'loaded' && [...document.images].every(i => i.complete)")
    page.wait_for_load_state("networkidle")
    assert not attempted, sorted(set(attempted))
    page.wait_for_selector(ready)
    return page, attempted


def assert_offline_text(page, attempted: list[str]) -> None:
    assert not attempted, sorted(set(attempted))   # none after drawing either
    assert page.evaluate(FROM_NAME) == []
    assert "evil.example/p" in page.inner_text("body")   # the name is there, shown as text


def test_chart_download_of_a_crafted_name_is_offline(browser, tmp_path):
    """Compare's bars carry each pinned config's name as the trace name (legend and hover)."""
    fig = compare_bars("Parameters", [CRAFTED, "llama"], {"total": [8.0e9, 1.0e9], "non-embedding": [7.0e9, 0.9e9]},
                       "count", log=True)
    fig.update_layout(title_text=f"{CRAFTED}: parameters")
    path = tmp_path / "chart.html"
    path.write_text(export.figure_html(fig), encoding="utf-8")
    page, attempted = open_offline(browser, path, "svg.main-svg")
    assert page.locator(".plot-container").count() == 1
    assert page.locator("g.trace.bars").count() == 2          # both configs drew their bars
    assert_offline_text(page, attempted)
    page.close()


def test_handout_html_of_a_crafted_name_is_offline(browser, tmp_path):
    path = tmp_path / "handout.html"
    path.write_text(export.handout_html(ModelConfig(name=CRAFTED)), encoding="utf-8")
    page, attempted = open_offline(browser, path, "h1")
    assert page.locator("table").count() >= 4                 # configuration, parameters, memory, compute
    assert page.locator("svg g.node").count() > 0             # the block diagram, inline SVG from local Graphviz
    assert "architecture handout" in page.inner_text("h1")
    assert_offline_text(page, attempted)
    page.close()


def test_tradeoffs_charts_of_a_crafted_name_are_offline(browser, tmp_path):
    """The Trade-offs page's two downloads: the small multiples (titled with the config name) and the Pareto chart."""
    sweep = view.run_spec(ModelConfig(name=CRAFTED), view.SweepSpec(knob="n_kv_heads", values="1,2,4"))
    rows = sweep.rows()
    title = f"{sweep.base.name}: {' x '.join(sweep.knobs)}"   # the page's title for a sweep without a hold
    figures = {"panels": sweep_charts.small_multiples(rows, sweep.knobs, list(METRICS), title=title),
               "pareto": sweep_charts.pareto_figure(rows, sweep.knobs, "kv_cache_bytes", "total_params", title=title)}
    for name, fig in figures.items():
        path = tmp_path / f"sweep-{name}.html"
        path.write_text(export.figure_html(fig), encoding="utf-8")
        page, attempted = open_offline(browser, path, "svg.main-svg")
        assert page.locator(".plot-container").count() == 1, name
        assert page.locator("g.scatterlayer g.trace").count() >= 1, name
        assert_offline_text(page, attempted)
        page.close()
