"""Real browser: every metric value shows whole, never cut with an ellipsis. The page header of large models (six
metrics, exact counts in the hundreds of billions) at the screen sizes lecturers use (the Lecture sections' metrics
in present mode's large type: test_browser_lecture.py's projector walk). A value is cut when its text box
(Streamlit's ellipsis container inside stMetricValue) is wider than what it shows: scrollWidth > clientWidth."""
import pytest

from tests.browser_pages import CUT_JS, quiet, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
VIEWPORTS = [(1280, 800)]   # the narrowest columns: fonts are in rem, so a wider screen only gives a value more room
VALUES_JS = """() => [...document.querySelectorAll('[data-testid="stMetricValue"]')].map(v => v.innerText.trim())"""


@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_header_figures_show_whole(served_app, browser, width, height):
    page = browser.new_page(viewport={"width": width, "height": height})
    cut = {}
    for preset, figure in (("mixtral-8x7b", "46,702,792,704"), ("deepseek-v3", "671,026,404,352"),
                           ("llama-3-70b", "70,553,706,496")):
        page.goto(f"{served_app}/?preset={preset}")
        settle(page)
        # the preset's total drawn: a fresh-clone run once met a quiet page with one metric, of a run in progress
        page.wait_for_function(f"() => ({VALUES_JS})().includes({figure!r})")
        quiet(page)
        assert figure in page.evaluate(VALUES_JS), preset
        cut[preset] = page.evaluate(CUT_JS)
    page.goto(f"{served_app}/compare?preset=deepseek-v3")   # the header with deltas under each figure
    settle(page)
    cut["compare"] = page.evaluate(CUT_JS)
    page.close()
    assert not any(cut.values()), cut
