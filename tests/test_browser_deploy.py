"""Real browser on the Deploy page: a 70B QLoRA link draws the per-GPU chart and says it fits; an edit of the
GPU count lands in the URL; an impossible layout is named, never a traceback."""
import pytest

from tests.browser_pages import settle

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


def test_deploy_inference_mode_answers_and_draws_its_charts(served_app, browser):
    """Inference at 1280x800: no ZeRO, recompute or MFU control, no training time; the longest-context and
    concurrency answers show, and the memory-vs-context and tokens/s charts draw with their axis titles."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{served_app}/deploy?preset=llama-3.1-8b&mode=infer&gpu=rtx-4090-24gb&gpus=1&quant=gguf:Q4_K_M"
              "&seq=8192")
    settle(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    for label in ("ZeRO stage", "Activation recompute", "Assumed MFU", "Training tokens (0 = default)"):
        assert page.get_by_text(label, exact=True).count() == 0, label
    for label in ("Longest context", "Requests at once", "Tokens/s per user"):
        assert page.get_by_text(label, exact=True).first.is_visible(), label
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 3", timeout=60000)
    charts = page.locator(".js-plotly-plot")
    assert charts.nth(1).get_by_text("context (tokens, log scale)").first.count() == 1
    assert charts.nth(2).get_by_text("concurrent sequences (batch, log scale)").first.count() == 1
    assert page.get_by_text("days").count() == 0
    box = page.get_by_role("spinbutton", name="Concurrent sequences (batch)")
    box.fill("4")
    box.press("Enter")
    page.wait_for_function("location.search.includes('micro_batch=4')", timeout=30000)
    settle(page)
    assert page.get_by_text("Decode at batch 4", exact=False).first.is_visible()
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()
