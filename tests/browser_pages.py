"""What the real-browser tests wait for and look at on a page of the app (Playwright pages): a quiet page, a
settled one, a ticked box, a step that is taken once, and the text a box cuts."""
from __future__ import annotations

from tests.helpers import BROWSER_WAIT_MS

QUIET_JS = """() => { const now = document.body.innerHTML; const same = window.__lastDom === now;
    window.__lastDom = now; return same; }"""


def quiet(page) -> None:
    """Wait until the app is idle and drawn: its script run is over, no 'Running...' status widget, and the page
    is the same at two looks half a second apart (charts drawn, late layout passes done)."""
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
    page.wait_for_function('!document.querySelector(\'[data-testid="stStatusWidget"]\')')
    page.wait_for_function(QUIET_JS, polling=500)


def tick(page, label: str, tries: int = 5) -> None:
    """Tick the checkbox `label` and see the tick stay: a click that lands while the page reruns can be lost (seen
    under load), so each try waits for a quiet page, then clicks only if the box is still unticked."""
    box = page.get_by_role("checkbox", name=label)
    for _ in range(tries):
        quiet(page)
        if box.is_checked():
            return
        page.get_by_text(label, exact=True).click()
    quiet(page)
    assert box.is_checked(), f"{label}: still unticked after {tries} clicks"


def step(page, act, before, after, tries: int = 3, wait_ms: int = 60_000) -> None:
    """Do `act` (a click or a key press that moves the page on) until `after` (a locator) shows. An input that lands
    while the page reruns can be lost (a PageDown was, in CI under load), so a try that shows nothing in `wait_ms` is
    made again, but only on a quiet page that still shows `before`: a slow but taken step is never taken twice.
    Mid-rerun a page can show an element twice, the last run's copy beside the new one (seen under load: two
    checked "Present mode" switches while the layout changed), so each locator stands for its first match."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    before, after = before.first, after.first
    for _ in range(tries):
        quiet(page)
        if after.is_visible() or not before.is_visible():
            break
        act()
        try:
            after.wait_for(timeout=wait_ms)
            return
        except PlaywrightTimeout:
            continue
    after.wait_for()   # names what never showed


def settle(page, timeout_ms: int = BROWSER_WAIT_MS) -> None:
    """Wait until a page of the app has drawn its navigation and metric row, and is quiet."""
    page.wait_for_selector('[data-testid="stSidebarNav"]', timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stMetric"]', timeout=timeout_ms)
    quiet(page)


# Text the page cuts: a box that clips (overflow not visible) and holds more than it shows, as Streamlit's ellipsis
# containers do ("Small traini…"), a row of choices that scrolls sideways ("swiglu_cla" of the curve pills), and
# inputs whose value is wider than the box ("sizes as g"). Charts and tables (which scroll by design) excluded.
CUT_TEXT_JS = """() => [...document.querySelectorAll('[data-testid="stMain"] *')].filter(e =>
      !e.closest('.js-plotly-plot') && e.scrollWidth > e.clientWidth + 1 && (e.tagName === 'INPUT'
        ? e.type !== 'hidden' && e.clientWidth > 0 && e.value
        : e.innerText && e.innerText.trim() && (getComputedStyle(e).overflowX === 'hidden'
          || (getComputedStyle(e).overflowX !== 'visible' && e.closest('[data-testid="stButtonGroup"]')))))
    .map(e => [(e.tagName === 'INPUT' ? e.value : e.innerText).trim().slice(0, 60), e.scrollWidth, e.clientWidth])"""


# Real browser: metric values whose text box is cut (Streamlit's ellipsis container wider than what it shows)
CUT_JS = """() => [...document.querySelectorAll('[data-testid="stMetricValue"]')].flatMap(v =>
    [v, ...v.querySelectorAll('*')].filter(e => e.scrollWidth > e.clientWidth)
        .map(e => [v.innerText.trim(), e.scrollWidth, e.clientWidth]))"""
