"""Lecture 'you store every expert, you compute k': Mixtral's numbers by hand, and the section renders."""
from app.charts.lecture import store_vs_compute_figure
from engine.lecture import store_vs_compute


def test_mixtral_store_vs_compute_by_hand():
    r = store_vs_compute("mixtral-8x7b")
    assert (r.total, r.active, r.experts, r.per_token) == (46_702_792_704, 12_879_925_248, 8, 2)
    assert r.weights_bf16 == 2 * 46_702_792_704
    attn, expert, head = 2 * 4096 ** 2 + 2 * 4096 * 1024, 3 * 4096 * 14336, 32000 * 4096
    assert r.forward_flops_per_token == 2 * (32 * (attn + 8 * 4096 + 2 * expert) + head)
    assert r.dense_equivalent_flops == 2 * (32 * (attn + 8 * expert) + head)   # every expert, no router
    assert r.routed_share == 32 * 8 * expert / 46_702_792_704
    fig = store_vs_compute_figure(r)
    assert list(fig.data[0].text) == ["46,702,792,704", "12,879,925,248"] and "billions" in fig.layout.yaxis.title.text


def test_section_renders(new_app):
    at = new_app("pages/lecture.py", section="moe")
    at.run()
    assert not at.exception and not at.error
    assert {m.label: m.value for m in at.metric}["used per token"] == "12,879,925,248"
