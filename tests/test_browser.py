"""Real browser: Debian's Chromium opens every page of the served app (pages discovered from the navigation).

Fails on any Streamlit exception element; checks the Llama-3-8B total, a Plotly chart on the four analysis
pages, and saves screenshots of Design and Budgets to docs/screenshots/ for the README.
"""
from pathlib import Path

import pytest

from tests.helpers import settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
CHART_PAGES = {"design", "budgets", "activations", "compare"}


def slug(href: str, base: str) -> str:
    return href.removeprefix(base).strip("/").split("?")[0] or "design"


def test_every_page(served_app, browser):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    # A shared link straight to a page, first request of a fresh server: still the full app with the sidebar.
    page.goto(f"{served_app}/budgets?preset=llama-3-8b&n_layers=16")
    settle(page)
    assert page.get_by_text("Budgets: llama-3-8b").first.is_visible()
    assert page.locator('[data-testid="stSidebar"] input[aria-label="n_layers"]').input_value() == "16"
    page.goto(f"{served_app}/?preset=llama-3-8b")
    settle(page)
    assert page.get_by_text("8,030,261,248").first.is_visible()
    links = page.locator('[data-testid="stSidebarNav"] a')
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    slugs = {slug(h, served_app): h for h in hrefs}
    assert CHART_PAGES <= set(slugs), slugs
    SHOTS.mkdir(parents=True, exist_ok=True)
    for name, href in slugs.items():
        page.goto(f"{served_app}/{'' if name == 'design' else name}?preset=llama-3-8b")
        settle(page)
        errors = page.locator('[data-testid="stException"]')
        assert errors.count() == 0, f"{name}: {errors.first.inner_text()[:500]}"
        if name in CHART_PAGES:
            page.wait_for_selector(".js-plotly-plot", timeout=30000)
            assert page.locator(".js-plotly-plot").count() >= 1, name
        if name in ("design", "budgets"):
            page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=name == "design")
    page.close()
