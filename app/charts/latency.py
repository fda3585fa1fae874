"""Figures of the Latency page: measured latency and throughput over a batch x sequence sweep, and the decode step
vs context. Inputs are engine.measure.latency / engine.measure.decode results (LatencyResult, DecodePoint); a
noisy point (IQR > 25% of its median) is drawn as a cross."""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import plotly.graph_objects as go

from app.charts import layout, series_color


def _log_axis(values) -> dict:
    """A log axis labelled with full numbers: 1, 2, 5 per decade when the data span a decade or more; under a
    decade, evenly spaced round values (1-2-5 alone gives 291..391 tokens/s no tick, Plotly's own choice one)."""
    vals = [v for v in values if v > 0]
    if not vals or max(vals) >= 10 * min(vals):
        return dict(type="log", tickformat=",~g", dtick="D2")
    lo, hi = min(vals), max(vals)
    raw = (hi - lo) / 4 or lo / 4
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = [round(first + i * step, 12) for i in range(int((hi - first) / step) + 2) if first + i * step > 0]
    return dict(type="log", tickformat=",~g", tickmode="array", tickvals=ticks)


def _tokens_axis(values) -> dict:
    """A log axis of token counts ticked at exactly the measured powers of two, with thousands separators."""
    ticks = sorted(set(values))
    return dict(type="log", tickmode="array", tickvals=ticks, ticktext=[f"{v:,}" for v in ticks])


NOISY_LEGEND = "✕ noisy: IQR > 25% of the median"


def _noisy_marker(points: Sequence[Any]) -> dict:
    """A cross, larger, where a point's spread is too wide to compare (LatencyResult.noisy / DecodePoint.noisy)."""
    return dict(symbol=["x" if p.noisy else "circle" for p in points], size=[13 if p.noisy else 7 for p in points])


def _noisy_legend(fig: go.Figure, points: Sequence[Any]) -> None:
    """One legend entry explaining the cross, only when some point is noisy."""
    if any(p.noisy for p in points):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=NOISY_LEGEND,
                                 marker=dict(symbol="x", size=13, color="#444444"), hoverinfo="skip"))


def _by_batch(results: Sequence[Any]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for r in sorted(results, key=lambda r: (r.batch, r.seq)):
        out.setdefault(r.batch, []).append(r)
    return out


def latency_figure(results: Sequence[Any]) -> go.Figure:
    """Median time per call vs sequence length, one line per batch size (IQR in the hover); log-log axes.
    No error bars: median +- IQR is not the quartile range and falls below zero on a log axis."""
    fig = go.Figure()
    for i, (batch, rs) in enumerate(_by_batch(results).items()):
        fig.add_trace(go.Scatter(
            x=[r.seq for r in rs], y=[r.median_ms for r in rs], mode="lines+markers", name=f"batch {batch}",
            line=dict(color=series_color(i)), marker=_noisy_marker(rs),
            customdata=[[r.iqr_ms, r.runs, " (noisy)" if r.noisy else ""] for r in rs],
            hovertemplate="seq %{x:,}: median %{y:.3f} ms<br>IQR %{customdata[0]:.3f} ms%{customdata[2]} over "
                          "%{customdata[1]:,} calls<extra></extra>"))
    _noisy_legend(fig, results)
    fig.update_xaxes(title_text="sequence length (tokens, log)", **_tokens_axis(r.seq for r in results))
    fig.update_yaxes(title_text="median latency per call (ms, log)", **_log_axis(r.median_ms for r in results))
    mode = results[0].mode if results else "forward"
    return layout(fig, f"Measured {'forward + backward' if mode == 'train' else 'forward'} latency", height=420)


def throughput_figure(results: Sequence[Any]) -> go.Figure:
    """Tokens per second vs sequence length, one line per batch size (hover: TFLOP/s and MFU)."""
    fig = go.Figure()
    for i, (batch, rs) in enumerate(_by_batch(results).items()):
        fig.add_trace(go.Scatter(
            x=[r.seq for r in rs], y=[r.tokens_per_s for r in rs], mode="lines+markers", name=f"batch {batch}",
            line=dict(color=series_color(i)), marker=_noisy_marker(rs),
            customdata=[[r.achieved_tflops, r.mfu_text] for r in rs],
            hovertemplate="seq %{x:,}: %{y:,.0f} tokens/s<br>%{customdata[0]:.4g} TFLOP/s, MFU %{customdata[1]}"
                          "<extra></extra>"))
    fig.update_xaxes(title_text="sequence length (tokens, log)", **_tokens_axis(r.seq for r in results))
    _noisy_legend(fig, results)
    fig.update_yaxes(title_text="throughput (tokens/s, log)", **_log_axis(r.tokens_per_s for r in results))
    return layout(fig, "Measured throughput", height=420)


def decode_figure(curves: Mapping[str, Sequence[Any]]) -> go.Figure:
    """Time for one new token vs tokens already in the KV cache, one line per attention variant."""
    fig = go.Figure()
    for i, (label, points) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(
            x=[p.context for p in points], y=[p.median_ms for p in points], mode="lines+markers", name=label,
            line=dict(color=series_color(i)), marker=_noisy_marker(points),
            customdata=[[p.cache_bytes / 2**20, p.iqr_ms, " (noisy)" if p.noisy else ""] for p in points],
            hovertemplate=f"{label}, context %{{x:,}}: %{{y:.3f}} ms/token<br>KV cache %{{customdata[0]:.2f}} MiB"
                          ", IQR %{customdata[1]:.3f} ms%{customdata[2]}<extra></extra>"))
    _noisy_legend(fig, [p for points in curves.values() for p in points])
    fig.update_xaxes(title_text="context already cached (tokens, log)",
                     **_tokens_axis(p.context for points in curves.values() for p in points))
    fig.update_yaxes(title_text="decode step latency (ms per token, log)",
                     **_log_axis(p.median_ms for points in curves.values() for p in points))
    return layout(fig, "Decode step vs context: " + ", ".join(curves), height=420)

