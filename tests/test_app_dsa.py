"""AppTest: `?preset=deepseek-v3.2` on every page renders with its exact count; the Design page's block diagram
(an SVG laid out by the local Graphviz) draws the lightning indexer from the block layout, its key in the cache
box and the top-k mask; Budgets' KV series hold the indexer's FP8 key cache as its own part (132 B a token and
layer) beside the latent cache, and its caption says so."""
import base64

import pytest

from engine.presets import PRESETS

PAGES = ["pages/design.py", "pages/budgets.py", "pages/activations.py", "pages/latency.py", "pages/training.py",
         "pages/compare.py", "pages/lecture.py", "pages/tradeoffs.py"]
TOTAL = "671,877,929,216"


def _svgs(at) -> list[str]:
    """The SVG text of every st.image the run drew (data URLs)."""
    out, todo = [], [at._tree]
    while todo:
        node = todo.pop()
        if getattr(node, "type", None) == "image":
            out += [base64.b64decode(i.url.split(",", 1)[1]).decode() for i in node.proto.imgs
                    if i.url.startswith("data:image/svg+xml;base64,")]
        todo += list(getattr(node, "children", {}).values())
    return out


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_deepseek_v32(new_app, page):
    at = new_app(page, preset="deepseek-v3.2")
    at.run(timeout=120)
    assert not at.exception, page
    assert {m.label: m.value for m in at.metric}["Total parameters"] == TOTAL, page


def test_design_diagram_draws_the_indexer_and_its_cached_key(new_app):
    import shutil
    if shutil.which("dot") is None:
        pytest.skip("no local Graphviz: the diagram is drawn in the browser instead")
    at = new_app("pages/design.py", preset="deepseek-v3.2")
    at.run(timeout=120)
    assert not at.exception
    svg = next(s for s in _svgs(at) if "lightning indexer" in s)
    for text in ("indexer wq_b (queries)", "1,536→64×128", "indexer key", "FP8 + scale, 132 B",
                 "keep the top 2,048 keys", "causal mask ∩ top 2,048", "over every earlier key"):
        assert text in svg, text


def test_kv_series_hold_the_indexer_keys_as_their_own_part():
    from app.compute import kv_series
    cfg = PRESETS["deepseek-v3.2"].config
    grid, series = kv_series(cfg, 1, "bf16")
    at = grid.index(max(grid))
    t = grid[at]
    assert series["part: indexer keys (FP8 + scale)"][at] == 61 * 132 * t
    assert series["part: MLA latent + rotary key"][at] == 70_272 * t
    assert series["current (MLA)"][at] == (70_272 + 61 * 132) * t
    assert "part: indexer keys (FP8 + scale)" not in kv_series(PRESETS["deepseek-v3"].config, 1, "bf16")[1]


def test_budgets_caption_explains_the_indexer_cache(new_app):
    at = new_app("pages/budgets.py", preset="deepseek-v3.2")
    at.run(timeout=120)
    assert not at.exception
    text = " ".join(c.value for c in at.caption)
    assert "lightning indexer's key per token in 61 layers: 128 FP8 bytes and an fp32 scale per 128" in text
