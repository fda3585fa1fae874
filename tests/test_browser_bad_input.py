"""Real browser: what a newcomer types wrong gets a message naming the field and what is allowed, and the YAML
uploader states the limit the app applies. (A number box refused d_model = 1e20 in the browser itself, with a
red frame and no message; the uploader said "1MB per file" and refused anything over 64 KiB.)"""
import pytest

from engine.limits import MAX_CONFIG_BYTES
from tests.browser_pages import settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LOAD = 60_000
UPLOADER_LIMIT_JS = """() => [...document.querySelectorAll('[data-testid="stSidebar"] [data-testid="stFileUploaderDropzoneInstructions"] span')]
  .map(s => [getComputedStyle(s, '::after').content, parseFloat(getComputedStyle(s).fontSize)])"""


def test_a_huge_d_model_is_named_with_its_limit_and_the_uploader_states_its_own(served_app, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{served_app}/?preset=gpt2")
    settle(page)
    box = page.get_by_role("textbox", name="d_model", exact=True)
    box.fill("1e20")
    box.press("Enter")
    message = page.locator('[data-testid="stSidebar"] [data-testid="stAlert"]').filter(has_text="d_model:")
    message.first.wait_for(timeout=LOAD)
    text = message.first.inner_text()
    assert "d_model: 100,000,000,000,000,000,000 is more than 9,007,199,254,740,991" in text, text
    shown = page.evaluate(UPLOADER_LIMIT_JS)
    page.close()
    assert shown == [[f'"{MAX_CONFIG_BYTES // 1024} KiB per file • YAML, YML"', 0]], shown
