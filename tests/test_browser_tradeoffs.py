"""Real browser on the Trade-offs page: a sweep from a link draws both charts, an edit lands in the URL, present
mode hides the sidebar, and a small measured sweep finishes and its runs appear on the Training page."""
import os

import pytest

from tests.helpers import quiet, settle

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
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{served_app}/tradeoffs?preset=microgpt&knob=n_kv_heads&values=1,4&small=true")
    settle(page)
    page.get_by_text("Measured columns").click()
    page.get_by_text("Val loss of a short run", exact=True).click()
    quiet(page)
    for label, value in (("Training steps per point", "3"), ("Latency time budget (s)", "1"), ("Latency tokens", "8")):
        field = page.get_by_role("spinbutton", name=label)
        field.fill(value)
        field.press("Enter")
        quiet(page)
    page.get_by_role("button", name="Measure", exact=True).click()
    page.get_by_text("Every point measured.").first.wait_for(timeout=400000)   # a shared, loaded CPU
    # the fragment's message first, then a full rerun redraws the charts with the measured panels
    page.locator(".js-plotly-plot").first.get_by_text("forward latency").first.wait_for()
    page.get_by_text("Training → Stored runs").first.wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
    shot(page, "tradeoffs-measured")
    page.goto(f"{served_app}/training")
    settle(page)
    assert page.get_by_text("microgpt-small n_kv_heads=4 on names (finished)").first.is_visible()
    page.close()
