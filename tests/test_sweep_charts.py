"""Sweep figures (small multiples, Pareto), the URL form of a sweep, and PNG export at projector size."""
from __future__ import annotations

import struct

import plotly.graph_objects as go
import pytest

from app.charts import sweep as charts
from app.image_export import PROJECTOR, figure_png, for_projector, png_unavailable
from app.sweep_view import SweepSpec, held_text, run_spec, spec_from_params, spec_to_params
from engine.config import ConfigError
from engine.presets import get_preset
from engine.sweep import METRICS, run_sweep

LLAMA3 = get_preset("llama-3-8b").config


def test_small_multiples_one_panel_per_metric_with_units():
    s = run_sweep(LLAMA3, {"n_kv_heads": [1, 2, 4, 8, 32, 5]})
    fig = charts.small_multiples(s.rows(), s.knobs, list(METRICS))
    assert len(fig.data) == len(METRICS) and [a.text for a in fig.layout.annotations] == [m.label for m in METRICS.values()]
    kv = fig.data[list(METRICS).index("kv_cache_bytes")]
    assert list(kv.x) == ["1", "2", "4", "8", "32"] and list(kv.y) == [0.125, 0.25, 0.5, 1.0, 4.0]   # GiB, 5 skipped
    titles = {fig.layout[f"yaxis{i + 1 if i else ''}"].title.text for i in range(len(METRICS))}
    assert titles == {"billions", "GiB", "GFLOP", "B"}     # the unit; B: the recurrent state, 0 without such layers
    # the knob under the lowest panel of each column only (8 panels in 3 columns: 6, 7 and 8)
    assert [fig.layout[f"xaxis{i + 1 if i else ''}"].title.text for i in range(len(METRICS))] == \
        [None] * 5 + ["n_kv_heads"] * 3
    assert list(fig.layout.xaxis.categoryarray)[-1] == "5"


def test_second_knob_is_one_coloured_line_per_value():
    s = run_sweep(LLAMA3, {"n_kv_heads": [1, 8], "attn_window": [1024, None]})
    fig = charts.small_multiples(s.rows(), s.knobs, ["kv_cache_bytes"])
    assert [t.name for t in fig.data] == ["attn_window=1,024", "attn_window=full"]
    assert fig.data[0].line.color != fig.data[1].line.color
    assert list(fig.data[0].y) == [1 / 64, 1 / 8] and list(fig.data[1].y) == [1 / 8, 1.0]   # GiB; 1,024 of 8,192 held


def test_pareto_labels_every_point_and_colours_the_front():
    rows = [{"n_kv_heads": k, "kv_cache_bytes": kv, "val_loss": loss}
            for k, kv, loss in ((1, 2**20, 3.0), (2, 2**21, 2.5), (4, 2**22, 2.6), (8, 2**23, 2.0))]
    fig = charts.pareto_figure(rows, ("n_kv_heads",), "kv_cache_bytes", "val_loss")
    dominated, front = fig.data
    assert list(front.text) == ["1", "2", "8"] and list(dominated.text) == ["4"]
    assert list(front.x) == [1, 2, 8] and fig.layout.xaxis.title.text == "KV cache (MiB)"
    assert fig.layout.yaxis.title.text == "val loss after a short run (nats)"


def test_a_held_count_does_not_zoom_the_pareto_axis_into_rounding_noise():
    """Holding total parameters by solving d_ff: the totals alternate by d_ff's rounding (7,996,706,816 and
    8,030,261,248 for llama-3-8b, under 0.5%). Size axes start at zero (the dots sit level, as they should);
    the chart says what is held and to what tolerance. A measured axis (val loss) still zooms to its data."""
    s = run_spec(LLAMA3, SweepSpec(hold="d_ff"))
    totals = {r["total_params"] for r in s.rows()}
    assert totals == {7_996_706_816, 8_030_261_248}
    fig = charts.pareto_figure(s.rows(), s.knobs, "kv_cache_bytes", "total_params", note=held_text(s))
    assert fig.layout.yaxis.rangemode == "tozero" and fig.layout.xaxis.rangemode == "tozero"
    one_step = 3 * 4096 * 32 * 256     # gated: 3 matrices of d_model x d_ff in each of 32 layers, d_ff in steps of 256
    assert held_text(s) == ("d_ff solved at each point to keep total parameters at 8,030,261,248 (d_ff is a multiple "
                            f"of 256: within ±{one_step // 2:,})")
    assert max(totals) - min(totals) <= one_step // 2
    assert fig.layout.title.subtitle.text == held_text(s)
    rows = [{"n_kv_heads": k, "kv_cache_bytes": 2**20 * k, "val_loss": 2.5 - 0.01 * k} for k in (1, 2, 4)]
    assert charts.pareto_figure(rows, ("n_kv_heads",), "kv_cache_bytes", "val_loss").layout.yaxis.rangemode == "normal"
    assert held_text(run_spec(LLAMA3, SweepSpec())) == ""


def test_present_mode_enlarges_panel_titles_and_makes_room_for_the_held_note(monkeypatch):
    from app import present
    s = run_spec(LLAMA3, SweepSpec(hold="d_ff"))
    monkeypatch.setattr(present, "is_present", lambda: True)
    fig = present.scale(charts.small_multiples(s.rows(), s.knobs, list(METRICS), note=held_text(s)))
    assert {a.font.size for a in fig.layout.annotations} == {present.PRESENT_FONT + 2}
    assert fig.layout.margin.t == 100 + 60 and fig.layout.title.subtitle.font.size == present.PRESENT_FONT - 4


def test_axis_scale_and_formats():
    assert charts.axis_scale("bytes", [3 * 2**30]) == (2**30, "GiB")
    assert charts.axis_scale("FLOP", [5.1e10]) == (1e9, "GFLOP")
    assert charts.axis_scale("parameters", [124_439_808]) == (1e6, "millions of parameters")
    assert charts.fmt_metric("total_params", 8_030_261_248) == "8,030,261,248"
    assert charts.fmt_metric("kv_cache_bytes", None) == "—"


def test_spec_round_trips_through_the_url():
    spec = SweepSpec(knob="n_layers", values="6,12", hold="d_model", hold_target="non_embedding", small=True,
                     x="kv_cache_bytes", y="val_loss")
    params = spec_to_params(spec)
    assert params == {"knob": "n_layers", "values": "6,12", "hold": "d_model", "hold_target": "non_embedding",
                      "small": "true", "y": "val_loss"}
    assert spec_from_params(params) == (spec, [])
    spec, problems = spec_from_params({"knob": "nope", "hold": "x", "small": "maybe", "section": "rope"})
    assert spec == SweepSpec() and problems == ["knob: 'nope' is not a config field one can sweep",
                                                "hold: 'x' is not one of d_ff, d_model",
                                                "small: 'maybe' is not true or false"]


def test_run_spec_names_bad_values():
    with pytest.raises(ConfigError, match="values2: n_layers: 'x' is not an integer >= 1"):
        run_spec(LLAMA3, SweepSpec(knob2="n_layers", values2="2,x"))
    s = run_spec(LLAMA3, SweepSpec(knob="norm", values="rmsnorm,batchnorm"))   # a bad choice: an invalid point
    assert s.points[1].problems == ["norm: 'batchnorm' is not one of layernorm, rmsnorm"]
    s = run_spec(LLAMA3, SweepSpec(knob="n_kv_heads", small=True))
    assert s.base.d_model == 64 and [p.values["n_kv_heads"] for p in s.points] == [1, 2, 4]


def test_png_at_projector_size():
    fig = charts.pareto_figure(run_sweep(LLAMA3, {"n_kv_heads": [1, 8]}).rows(), ("n_kv_heads",), "kv_cache_bytes",
                               "total_params")
    big = for_projector(fig)
    assert (big.layout.width, big.layout.height) == PROJECTOR and big.layout.font.size >= 24
    assert fig.layout.width is None                                    # the page's figure is untouched
    if png_unavailable():
        pytest.skip(png_unavailable())
    png = figure_png(fig)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == PROJECTOR                 # IHDR width, height


def test_kaleidos_page_race_is_tried_again_and_other_errors_are_not(monkeypatch):
    """kaleido 1.5 can call into its page before the page's script runs ("kaleido_scopes is not defined", seen in
    a loaded whole-suite run): figure_png opens a fresh page up to three times; any other error is raised at once."""
    from app import image_export
    calls = []

    def to_image(self, **kw):
        calls.append(kw)
        if len(calls) < 3:
            raise RuntimeError("JavascriptError: ReferenceError: kaleido_scopes is not defined")
        return b"png"

    monkeypatch.setattr(image_export, "png_unavailable", lambda: None)
    monkeypatch.setattr(go.Figure, "to_image", to_image)
    assert figure_png(go.Figure()) == b"png" and len(calls) == 3
    calls.clear()

    def always_racing(self, **kw):
        calls.append(kw)
        raise RuntimeError("JavascriptError: ReferenceError: kaleido_scopes is not defined")

    monkeypatch.setattr(go.Figure, "to_image", always_racing)
    with pytest.raises(RuntimeError, match="kaleido_scopes"):
        figure_png(go.Figure())
    assert len(calls) == 3                       # no endless retry
    monkeypatch.setattr(go.Figure, "to_image", lambda self, **kw: calls.append(kw) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        figure_png(go.Figure())
    assert len(calls) == 4                       # another error: one call, raised


def test_a_hung_render_is_abandoned_and_tried_again(monkeypatch):
    """Chromium exiting mid-render left kaleido waiting on its pipe for ever (a whole-suite run hung on it):
    figure_png gives up on a render past its deadline, tries a fresh one, and says what happened if all hang."""
    import threading

    from app import image_export
    calls, never = [], threading.Event()

    def hangs_twice(self, **kw):
        calls.append(kw)
        if len(calls) < 3:
            never.wait()
        return b"png"

    monkeypatch.setattr(image_export, "png_unavailable", lambda: None)
    monkeypatch.setattr(image_export, "RENDER_DEADLINE_S", 0.05)
    monkeypatch.setattr(go.Figure, "to_image", hangs_twice)
    try:
        assert figure_png(go.Figure()) == b"png" and len(calls) == 3
        monkeypatch.setattr(go.Figure, "to_image", lambda self, **kw: calls.append(kw) or never.wait())
        with pytest.raises(TimeoutError, match="did not finish in 0 s"):
            figure_png(go.Figure())
        assert len(calls) == 6                       # three tries, then the error
    finally:
        never.set()                                  # the abandoned renders end

