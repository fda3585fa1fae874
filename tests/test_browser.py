"""Real browser: Debian's Chromium opens every page of the served app (pages discovered from the navigation).

Fails on any Streamlit exception element; checks the Llama-3-8B total, a Plotly chart on the four analysis
pages, and that the app asks for nothing outside this machine (every non-loopback request is blocked and
recorded). Screenshots of Design and Budgets go to a temporary folder, or to docs/screenshots/ for the README
with UPDATE_SCREENSHOTS=1, so the suite never rewrites tracked files.
"""
import os
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.browser_pages import settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
DOCS_SHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
CHART_PAGES = {"design", "budgets", "activations", "compare"}
HEADINGS = {"design": "Design", "budgets": "Budgets", "activations": "Activations", "latency": "Latency",
            "training": "Training", "compare": "Compare", "tradeoffs": "Trade-offs", "deploy": "Deploy",
            "lecture": "Lecture"}   # each page's title (app/widgets.py page_header) starts with its nav label


def slug(href: str, base: str) -> str:
    return href.removeprefix(base).strip("/").split("?")[0] or "design"


def local(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme in ("data", "blob", "about") or parsed.hostname in ("127.0.0.1", "localhost", "::1")


def block_off_machine(page) -> list[str]:
    """Abort every request that leaves the machine; the returned list fills with their URLs."""
    attempted: list[str] = []

    def route(r) -> None:
        if local(r.request.url):
            r.continue_()
        else:
            attempted.append(r.request.url)
            r.abort()

    page.context.route("**/*", route)
    page.on("request", lambda req: None if local(req.url) else attempted.append(req.url))
    return attempted


def test_every_page(served_app, browser, tmp_path):
    shots = DOCS_SHOTS if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    off_machine = block_off_machine(page)
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
    shots.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(slugs):   # as a user moves between pages: the sidebar, one session, no reload
        links.nth(i).click()
        page.wait_for_url(f"{served_app}/{'' if name == 'design' else name}*")
        page.get_by_role("heading", name=re.compile("^" + HEADINGS[name])).first.wait_for()
        settle(page)
        assert page.get_by_text("8,030,261,248").first.is_visible()   # the session's config follows the user
        errors = page.locator('[data-testid="stException"]')
        assert errors.count() == 0, f"{name}: {errors.first.inner_text()[:500]}"
        if name in CHART_PAGES:
            page.wait_for_selector(".js-plotly-plot")
            assert page.locator(".js-plotly-plot").count() >= 1, name
        if name in ("design", "budgets"):
            page.screenshot(path=str(shots / f"{name}.png"), full_page=name == "design")
        icons = page.eval_on_selector_all('link[rel~="icon"]', "els => els.map(e => e.href)")
        assert icons and all(local(href) for href in icons), icons   # the favicon too (fetched outside the page)
    assert not off_machine, sorted(set(off_machine))
    page.close()
