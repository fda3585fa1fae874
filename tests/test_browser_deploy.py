"""Real browser on the Deploy page: a 70B QLoRA link draws the per-GPU chart and says it fits; an edit of the
GPU count lands in the URL; an impossible layout is named, never a traceback."""
import pytest

from tests.helpers import settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_deploy_link_chart_edit_and_bad_layout(served_app, browser):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{served_app}/deploy?preset=llama-3-70b&finetune=qlora&gpus=1&zero=0&seq=1024")
    settle(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.wait_for_selector(".js-plotly-plot")
    assert page.get_by_text("Fits:").first.is_visible()
    assert page.locator(".js-plotly-plot").first.get_by_text("memory per GPU (GiB)").first.is_visible()
    box = page.get_by_role("spinbutton", name="Tensor parallel (tp)")
    box.fill("3")
    box.press("Enter")
    page.wait_for_function("location.search.includes('tp=3')")
    settle(page)
    assert page.get_by_text("tp: 3 does not divide n_heads = 64").first.is_visible()
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()
