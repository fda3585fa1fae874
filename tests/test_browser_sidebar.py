"""Real browser: the sidebar editor keeps working after a norm switch. Streamlit's selectbox sends its displayed
label back as the value, so a label that changed with another field (norm_bias's "follow the norm (off)" after
norm became layernorm) came back as an invalid value and froze every later edit until Reset."""
import pytest

from tests.browser_pages import quiet, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def idle(page) -> None:
    quiet(page)     # script run over, no status widget, the page the same at two looks (no fixed sleeps)


def pick(page, field: str, option: str) -> None:
    page.get_by_role("combobox", name=field, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    idle(page)


def set_int(page, field: str, value: int) -> None:
    box = page.get_by_role("textbox", name=field, exact=True)
    box.fill(str(value))
    box.press("Enter")
    idle(page)


def errors(page) -> list[str]:
    return page.locator('[data-testid="stAlert"]').all_inner_texts()


def test_edits_apply_after_switching_an_rmsnorm_preset_to_layernorm(served_app, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{served_app}/?preset=llama-3-8b")
    settle(page)
    page.locator('[data-testid="stSidebar"]').get_by_text("Normalization", exact=True).click()
    idle(page)
    pick(page, "norm", "layernorm")
    set_int(page, "n_layers", 4)                     # the edit that used to be dropped
    assert errors(page) == []
    assert "n_layers=4" in page.url and "norm=layernorm" in page.url
    pick(page, "norm_bias", "false")                 # re-pick both ways; every edit still lands
    pick(page, "norm_bias", "follow the norm")
    set_int(page, "n_layers", 3)
    assert errors(page) == []
    assert "n_layers=3" in page.url and "norm_bias" not in page.url
    pick(page, "norm", "rmsnorm")
    set_int(page, "n_layers", 2)
    assert errors(page) == []
    assert "n_layers=2" in page.url and "norm=" not in page.url
    page.close()
