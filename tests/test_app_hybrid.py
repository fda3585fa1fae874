"""AppTest and figure builders for a hybrid (Qwen3-Next-80B-A3B): the Design page's layer map and exact total, the
Budgets page's inference memory vs context (weights, KV of the attention layers, state; every mixer attention)."""
from app.charts.budgets import context_memory_figure
from app.charts.design import layer_map_chart
from app.diagram import block_dot
from engine.budget.context_memory import all_attention, context_memory, crossings
from engine.presets import PRESETS

QWEN = PRESETS["qwen3-next-80b-a3b"].config
FULL = ", ".join(str(i) for i in range(4, 49, 4))


def test_design_shows_layer_map_and_exact_total(new_app):
    at = new_app(preset="qwen3-next-80b-a3b")
    at.run(timeout=120)
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Total parameters"] == "79,674,391,296"
    assert "Layer map" in [s.value for s in at.subheader]
    caption = " ".join(c.value for c in at.caption)
    assert f"softmax attention (full) in layers {FULL} (12)" in caption
    assert "Gated DeltaNet in layers 1–3, 5–7," in caption and "MoE in layers 1–48 (48)" in caption


def test_design_has_no_layer_map_for_one_kind(new_app):
    at = new_app(preset="llama-3-8b")
    at.run(timeout=120)
    assert not at.exception and "Layer map" not in [s.value for s in at.subheader]


def test_budgets_shows_memory_vs_context_with_state(new_app):
    at = new_app("pages/budgets.py", preset="qwen3-next-80b-a3b", replica_gpus="2")
    at.run(timeout=120)
    assert not at.exception
    assert "Inference memory vs context: weights, KV cache and state" in [h.value for h in at.header]
    caption = " ".join(c.value for c in at.caption)
    assert "KV cache of the 12 attention layers of 48 grows by 24.00 KiB per token" in caption
    assert "every mixer attention (" in caption and "96.00 KiB per token" in caption
    assert "2 × H100 (160.00 GiB) never (the whole context fits), every mixer attention at 131,375 tokens" in caption
    assert "RTX 4090" in caption and "A100" not in caption          # the GPUs marked by default


def test_layer_map_figure_is_the_engine_map():
    fig = layer_map_chart(QWEN)
    by_name = {t.name: t for t in fig.data}
    full = next(t for n, t in by_name.items() if n.startswith("mixer: softmax attention"))
    assert list(full.x) == list(range(4, 49, 4)) and full.name.endswith("(12 layers)")
    gdn = next(t for n, t in by_name.items() if n.startswith("mixer: Gated DeltaNet"))
    assert len(gdn.x) == 36 and gdn.customdata[0] == "Gated DeltaNet + MoE"
    assert "layer %{x} of 48" in gdn.hovertemplate and "in layers 1–3, 5–7, 9–11" in gdn.hovertemplate


def test_a_long_alternation_keeps_its_hover_short():
    """100,000 alternating layers: each cell names its own kind; the kind's 50,000-run list stays out of the hover
    (every cell once carried it: a quadratic page)."""
    fig = layer_map_chart(PRESETS["gemma-2-2b"].config.replace(n_layers=100_000))
    assert all(len(t.hovertemplate) < 300 and len(t.x) == 50_000 for t in fig.data if t.name.startswith("mixer"))


def test_block_diagram_carries_the_strip():
    dot = block_dot(QWEN)
    assert "layers 1–48: mixer (top), FFN (bottom)" in dot
    assert dot.count('TOOLTIP="layer ') == 2 * 48 and 'TOOLTIP="layer 4: softmax attention + MoE"' in dot
    assert "layer_map" not in block_dot(PRESETS["llama-3-8b"].config)


def test_context_memory_figure_stacks_the_engine_terms():
    grid = (1, 1024, 262_144)
    m, d = context_memory(QWEN, grid), context_memory(all_attention(QWEN), grid)
    marks = crossings(QWEN, 262_144, gpus=2, devices=["H100", "RTX 4090"])
    fig = context_memory_figure(m, d, marks)
    names = [t.name for t in fig.data]
    assert names[:5] == ["weights", "recurrent + conv state", "KV cache (attention layers)", "total",
                         "same model, every mixer attention"]
    gib = 2 ** 30
    kv = fig.data[2]
    assert [round(v * gib) for v in kv.y] == list(m.kv) and fig.layout.yaxis.title.text == "inference memory (GiB)"
    assert [round(v * gib) for v in fig.data[4].y] == list(d.totals)
    crosses = [t.hovertemplate for t in fig.data if t.mode == "markers"]
    assert any("every mixer attention crosses 2 × H100 at 131,375 tokens" in h for h in crosses)
    assert any("this model crosses 2 × RTX 4090 at 0 tokens (the weights alone" in h for h in crosses)
