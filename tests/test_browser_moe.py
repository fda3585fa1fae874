"""Real browser: ?preset=mixtral-8x7b shows the total and the active parameter counts in the metric row."""
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_mixtral_total_and_active(served_app, browser):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{served_app}/?preset=mixtral-8x7b")
    page.wait_for_selector('[data-testid="stMetric"]')
    page.wait_for_function('!document.querySelector(\'[data-testid="stStatusWidget"]\')')
    assert page.get_by_text("46,702,792,704").first.is_visible()
    assert page.get_by_text("12,879,925,248").first.is_visible()
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()
