"""Real browser on the Trade-offs page: a sweep from a link draws both charts, an edit lands in the URL, present
mode hides the sidebar, and a small measured sweep finishes and its runs appear on the Training page."""
import os
import re

import pytest

from app.charts import sweep as charts
from app.image_export import PROJECTOR, for_projector
from app.sweep_view import SweepSpec, held_text, run_spec
from engine.presets import get_preset
from engine.sweep import METRICS
from tests.browser_pages import CUT_TEXT_JS, quiet, settle, tick

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = os.environ.get("SWEEP_SHOTS")   # a folder to save screenshots in, for reviewing the look


def shot(page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"{name}.png"), full_page=True)


def test_closed_form_sweep_link_edit_and_present(served_app, browser):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{served_app}/tradeoffs?preset=llama-3-8b&knob=n_kv_heads&values=1,2,4,8,32,5")
    settle(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.wait_for_selector(".js-plotly-plot")
    assert page.locator(".js-plotly-plot").count() == 2
    assert page.get_by_text("n_kv_heads: 5 does not divide n_heads=32").first.is_visible()
    assert page.locator(".js-plotly-plot").first.get_by_text("KV cache").first.is_visible()
    shot(page, "tradeoffs")
    box = page.get_by_role("textbox", name="Values (comma-separated)")
    box.fill("1,8,32")
    box.press("Enter")
    page.wait_for_function("location.search.includes('values=1%2C8%2C32') || location.search.includes('values=1,8,32')")
    page.goto(f"{served_app}/tradeoffs?preset=llama-3-8b&knob=attn_window&x=kv_cache_bytes&y=flops_per_token&present=1")
    page.wait_for_selector(".js-plotly-plot")
    page.wait_for_function('!document.querySelector(\'[data-testid="stStatusWidget"]\')')
    assert not page.locator('[data-testid="stSidebar"]').is_visible()
    shot(page, "tradeoffs-present")
    page.close()


def test_small_measured_sweep_runs_show_on_training(served_app, browser):
    from playwright.sync_api import expect
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{served_app}/tradeoffs?preset=microgpt&knob=n_kv_heads&values=1,4&small=true")
    settle(page)
    page.get_by_text("Measured columns").click()
    # Each setting is checked where it shows before Measure is pressed: a CI run pressed Measure with the loss box
    # left unticked (its click landed while the page was still rerunning), so no run was trained or stored.
    tick(page, "Val loss of a short run")
    for label, value in (("Training steps per point", "3"), ("Latency time budget (s)", "1"), ("Latency tokens", "8")):
        field = page.get_by_role("spinbutton", name=label)
        field.fill(value)
        field.press("Enter")
        quiet(page)
        expect(field).to_have_value(value)
    page.get_by_text(re.compile(r"Expected: .*loss [0-9]")).first.wait_for()   # the server prices the training too
    page.get_by_role("button", name="Measure", exact=True).click()
    done = page.get_by_text("Every point measured.").first
    done.wait_for(timeout=400000)   # a shared, loaded CPU
    # two points, two stored runs (the server's store is shared by this worker's other browser tests: any ids)
    assert re.search(r"Training runs [0-9]+, [0-9]+ are in Training → Stored runs\.", done.inner_text()), \
        done.inner_text()
    # the fragment's message first, then a full rerun redraws the charts with the measured panels
    page.locator(".js-plotly-plot").first.get_by_text("forward latency").first.wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
    shot(page, "tradeoffs-measured")
    page.goto(f"{served_app}/training")
    settle(page)
    assert page.get_by_text("microgpt-small n_kv_heads=4 on names").first.is_visible()
    page.close()


@pytest.mark.parametrize("width,height", [(1280, 800)])   # the narrowest columns; a wider screen gives more room
def test_control_labels_and_values_show_whole(served_app, browser, width, height):
    """The sweep controls at the widths lecturers use: no label or value cut with an ellipsis ("Small traini…",
    "sizes as g"), nor the Lecture page's section buttons, nor the Activations page's curve names."""
    page = browser.new_page(viewport={"width": width, "height": height})
    cut = {}
    for path in ("tradeoffs?preset=llama-3-8b", "tradeoffs?preset=llama-3-8b&hold=d_ff", "lecture?preset=gpt2",
                 "activations?preset=llama-3-8b"):
        page.goto(f"{served_app}/{path}")
        settle(page)
        page.get_by_role("button", name="Next").or_(page.get_by_text("Small training size")).or_(
            page.get_by_text("Input range x")).first.wait_for()
        cut[path] = page.evaluate(CUT_TEXT_JS)
    page.close()
    assert not any(cut.values()), cut


# Where plotly drew each axis title and tick label, and each y axis's plot height: the offline HTML of the
# projector figure in Chromium, the same plotly.js that kaleido drives to write the PNG.
LAYOUT_JS = """() => {
  const o = document.querySelector('.main-svg').getBoundingClientRect();   // image coordinates: from its corner
  const box = e => { const r = e.getBoundingClientRect();
                     return {text: e.textContent, l: r.left - o.left, r: r.right - o.left, t: r.top - o.top,
                             b: r.bottom - o.top}; };
  const L = document.querySelector('.js-plotly-plot')._fullLayout;
  const ys = Object.keys(L).filter(k => /^yaxis[0-9]*$/.test(k)).map(k => {
    const title = document.querySelector(`.g-${k.replace('axis', '')}title text`);
    return {title: title && box(title), top: L[k]._offset, height: L[k]._length}; });   // _offset: image px
  return {ticks: [...document.querySelectorAll('.xaxislayer-above text, .yaxislayer-above text')].map(box),
          titles: [...document.querySelectorAll('[class^="g-x"][class$="title"] text, [class^="g-y"][class$="title"] text')].map(box),
          panels: [...document.querySelectorAll('.annotation-text')].map(box), ys}; }"""


def _projector_figures() -> dict:
    llama = run_spec(get_preset("llama-3-8b").config, SweepSpec(hold="d_ff"))
    gpt2 = run_spec(get_preset("gpt2").config, SweepSpec(knob="n_layers"))
    measured = [dict(r, latency_ms=1.25 + 0.125 * i, val_loss=2.5 - 0.01 * i) for i, r in enumerate(gpt2.rows())]
    return {"held panels": charts.small_multiples(llama.rows(), llama.knobs, list(METRICS), title="llama-3-8b",
                                                  note=held_text(llama)),
            "held pareto": charts.pareto_figure(llama.rows(), llama.knobs, "kv_cache_bytes", "total_params",
                                                note=held_text(llama)),
            "three rows of panels": charts.small_multiples(measured, gpt2.knobs,
                                                           [*METRICS, "latency_ms", "val_loss"], title="gpt2")}


def test_projector_png_axis_titles_clear_the_tick_labels_and_stay_by_their_panel(browser):
    def hit(a, b):
        return a["l"] < b["r"] - 1 and b["l"] < a["r"] - 1 and a["t"] < b["b"] - 1 and b["t"] < a["b"] - 1

    page = browser.new_page(viewport={"width": PROJECTOR[0], "height": PROJECTOR[1]})
    problems = []
    for name, fig in _projector_figures().items():
        page.set_content(for_projector(fig).to_html(include_plotlyjs=True, full_html=True))
        page.wait_for_selector(".yaxislayer-above text")
        drawn = page.evaluate(LAYOUT_JS)
        for title in drawn["titles"]:
            problems += [(name, title["text"], "over", other["text"]) for other in drawn["ticks"] + drawn["panels"]
                         if hit(title, other)]
        for y in drawn["ys"]:   # a vertical title longer than its panel runs into the next one's
            if y["title"] and (y["title"]["t"] < y["top"] - 2 or y["title"]["b"] > y["top"] + y["height"] + 2):
                problems.append((name, y["title"]["text"], "taller than its panel", y["height"]))
        every = drawn["titles"] + drawn["ticks"] + drawn["panels"]
        problems += [(name, t["text"], "outside the image") for t in every
                     if t["l"] < -1 or t["t"] < -1 or t["r"] > PROJECTOR[0] + 1 or t["b"] > PROJECTOR[1] + 1]
    page.close()
    assert not problems, problems
