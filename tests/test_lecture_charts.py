"""The Lecture page's figure builders draw the engine's numbers (AppTest cannot look inside st.plotly_chart)."""
import pytest

from app.charts import lecture as charts
from app.charts import COLORS
from engine import lecture


def axes_named(fig) -> bool:
    return bool(fig.layout.xaxis.title.text) and bool(fig.layout.yaxis.title.text)


def test_marked_activations_figure_plots_engine_curves_and_marks():
    curves = lecture.dense_activation_table(-2, 2, 9)
    fig = charts.marked_activations_figure(curves, (-1.0, 2.0))
    assert [t.name for t in fig.data] == ["relu", "gelu", "gelu_tanh", "silu", "relu2"]
    assert list(fig.data[1].y) == curves["gelu"] and len(fig.layout.shapes) == 2 and axes_named(fig)


def test_gating_figure_bars():
    fig = charts.gating_figure(lecture.gating_match(768))
    assert list(fig.data[0].y) == [4_718_592, 4_718_592, 7_077_888]
    assert list(fig.data[0].text) == ["4,718,592", "4,718,592", "7,077,888"] and axes_named(fig)


def test_serial_parallel_and_norm_figures():
    r = lecture.serial_vs_parallel()
    fig = charts.serial_parallel_figure(r)
    assert list(fig.data[0].y) == r.serial.output and list(fig.data[1].y) == r.parallel.output
    n = charts.norm_figure(lecture.norm_comparison())
    assert list(n.data[1].y) == pytest.approx([-1, 1]) and axes_named(n)


def test_absent_gradient_figure_colours_roles():
    r = lecture.absent_token_gradient((0, 2), 1)
    fig = charts.absent_gradient_figure(r)
    assert list(fig.data[0].text) == ["input", "target", "input", "absent", "absent"]
    assert fig.data[0].marker.color[3] == charts.ROLE_COLORS["absent"]
    assert fig.data[0].y[3] > 0


def test_rope_heatmap_is_constant_along_diagonals():
    grid = lecture.rope_score_grid(30, 6)
    fig = charts.rope_grid_figure(grid, 30)
    z = fig.data[0].z
    assert z[0][1] == pytest.approx(z[4][5], abs=1e-6) and axes_named(fig)


def test_softcap_and_mask_order_figures():
    fig = charts.softcap_figure(lecture.softcap_curve(30, -120, 120, 9), 30)
    assert max(fig.data[1].y) < 30 and fig.layout.yaxis2.title.text
    r = lecture.mask_order()
    m = charts.mask_order_figure(r)
    assert m.data[0].y[2] == 0 and m.data[1].y[2] > 0
    # the leak (0.0007 on a 0.7 axis: under a pixel) is written on its bar and called out over it
    assert list(m.data[1].text) == [f"{p:.4f}" for p in r.mask_then_cap] and m.data[1].text[2] == "0.0007"
    (leak,) = m.layout.annotations
    assert leak.text == "leaks 0.0007" and (leak.x, leak.y) == (2.2, r.mask_then_cap[2]) and leak.showarrow
    assert not charts.mask_order_figure(lecture.mask_order(masked=(False, False, False))).layout.annotations


def test_size_figures():
    kv = charts.kv_by_kind_figure(lecture.kv_cache_variants())
    assert list(kv.data[0].y) == [4, 1, 0.125] and list(kv.data[0].text) == ["4.00 GiB", "1.00 GiB", "128.00 MiB"]
    dw = charts.depth_figure(lecture.depth_vs_width())
    assert list(dw.data[0].y) == [1, 2, 4]
    mg = charts.microgpt_figure(lecture.microgpt_table())
    assert sum(mg.data[0].y) == 4224 and mg.data[0].marker.color[0] == COLORS["embeddings"]
    assert "4,224" in mg.layout.title.text


def test_present_mode_scales_figures(monkeypatch):
    from app import present
    fig = charts.kv_by_kind_figure(lecture.kv_cache_variants())
    monkeypatch.setattr(present, "is_present", lambda: False)
    assert present.scale(fig).layout.height is None
    monkeypatch.setattr(present, "is_present", lambda: True)
    big = present.scale(fig)
    assert big.layout.height == present.PRESENT_HEIGHT and big.layout.xaxis.tickfont.size == present.PRESENT_FONT
