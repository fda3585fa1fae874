"""Real browser: a crafted config name yields no link, no image and no off-machine request, on the page and in
the offline handout. Every request to a host other than this machine is blocked and recorded."""
import urllib.parse

import pytest

from app.export import external_references, handout_html, handout_markdown
from engine.config import ModelConfig
from tests.browser_pages import settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
CRAFTED = "[x](http://evil.example/phish) ![i](http://evil.example/t.png) <img src=http://evil.example/a.png>"
LOCAL = ("localhost", "127.0.0.1", "[::1]", "::1")


def test_crafted_name_makes_no_link_image_or_request(served_app, browser):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    off_machine: list[str] = []

    def guard(route):
        host = urllib.parse.urlsplit(route.request.url).hostname or ""
        if route.request.url.startswith(("data:", "blob:")) or host in LOCAL:
            return route.continue_()
        off_machine.append(route.request.url)
        return route.abort()

    page.route("**/*", guard)
    page.goto(f"{served_app}/?name={urllib.parse.quote(CRAFTED)}")
    settle(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    links = page.locator('a[href*="evil.example"]')
    assert links.count() == 0, [links.nth(i).evaluate("e => e.outerHTML + ' IN ' + e.parentElement.outerHTML.slice(0, 300)") for i in range(links.count())]
    assert page.locator('img[src*="evil.example"]').count() == 0
    assert page.get_by_text("evil.example/phish", exact=False).first.is_visible()   # shown, as text
    # Streamlit itself may ask Google Fonts for a nav icon (blocked here); nothing may come from the name
    assert not [u for u in off_machine if "evil.example" in u], off_machine
    page.close()


def test_handouts_of_a_crafted_name_stay_offline_text():
    cfg = ModelConfig(name=CRAFTED)
    page = handout_html(cfg)
    assert external_references(page) == [] and "evil.example" in page
    assert "<img" not in page.split("<svg")[0] and 'href="http://evil' not in page
    md = handout_markdown(cfg)
    prose = md.split("## Config YAML")[0]   # the YAML block at the end is a code fence: shown verbatim
    assert "](http" not in prose.replace("\\](http", "")   # every `](` of the name is escaped
