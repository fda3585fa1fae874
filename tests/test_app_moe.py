"""AppTest: an MoE preset on every page: the metric row shows active beside total, nothing raises."""
import pytest

PAGES = ["pages/design.py", "pages/budgets.py", "pages/activations.py", "pages/latency.py", "pages/training.py",
         "pages/compare.py", "pages/lecture.py"]


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_design_shows_mixtral_total_and_active(new_app):
    at = new_app(preset="mixtral-8x7b")
    at.run()
    assert not at.exception and not at.error
    shown = metrics(at)
    assert shown["Total parameters"] == "46,702,792,704" and shown["Active / token"] == "12,879,925,248"


def test_dense_preset_has_no_active_metric(new_app):
    at = new_app(preset="llama-3-8b")
    at.run()
    assert "Active / token" not in metrics(at)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_an_moe_preset(new_app, page):
    at = new_app(page, preset="qwen1.5-moe-a2.7b")
    at.run()
    assert not at.exception, page
    assert all("limited to" in e.value or "refusing to build" in e.value for e in at.error), page   # big builds
    assert metrics(at)["Active / token"] == "2,689,173,504"


def test_compare_pins_an_moe_and_its_dense_counterpart(new_app):
    at = new_app("pages/compare.py", preset="mixtral-8x7b")
    at.run()
    at.button(key="cmp_dense_equal").click().run()
    assert not at.exception and not at.error
    pinned = at.session_state["pins"]
    assert pinned[-1][1].n_experts is None and any(c.n_experts == 8 for _, c in pinned)
