"""AppTest: the DeepSeek-V3 preset (MLA) on every page: the total parameter count shows, nothing raises; the
Budgets KV series hold the latent cache (70,272 B/token) and the expanded cache beside MHA/GQA/MQA."""
import pytest

from engine.presets import PRESETS

PAGES = ["pages/design.py", "pages/budgets.py", "pages/activations.py", "pages/latency.py", "pages/training.py",
         "pages/compare.py", "pages/lecture.py", "pages/tradeoffs.py"]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_deepseek_v3(new_app, page):
    at = new_app(page, preset="deepseek-v3")
    at.run()
    assert not at.exception, page
    assert {m.label: m.value for m in at.metric}["Total parameters"] == "671,026,404,352", page   # every header


def test_kv_series_include_latent_and_expanded():
    from app.compute import kv_series
    cfg = PRESETS["deepseek-v3"].config
    grid, series = kv_series.__wrapped__(cfg, 1, "bf16") if hasattr(kv_series, "__wrapped__") else kv_series(cfg, 1)
    at = grid.index(max(grid))
    assert series["current (MLA)"][at] == 70_272 * grid[at]
    assert series["MLA, expanded per-head K/V"][at] == 61 * 128 * (192 + 128) * 2 * grid[at]
    assert series["MHA, full attention"][at] == 61 * 2 * 128 * 128 * 2 * grid[at]
