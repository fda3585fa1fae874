"""Figures of the Compare page: grouped bars, one group per metric and one bar per pinned config."""
from __future__ import annotations

import math

import plotly.graph_objects as go

from app.charts import layout
from engine.units import byte_unit, fmt_bytes, fmt_count_short, fmt_flops

PIN_COLORS = ("#4C78A8", "#F58518", "#54A24B", "#E45756")


CROWDED = 6   # more bars than this on one chart: labels are written upright


def compare_bars(title: str, labels: list[str], metrics: dict[str, list[float]], kind: str,
                 log: bool = False) -> go.Figure:
    """Grouped bars: one group per metric, one bar per pinned config. kind: 'count', 'bytes' or 'flops';
    `log` puts the value axis on a log scale so a 100M and a 70B model are both readable."""
    if kind not in ("count", "bytes", "flops"):
        raise ValueError(f"kind: {kind!r} is not one of count, bytes, flops")
    largest = max((v for vs in metrics.values() for v in vs), default=1)
    div, unit = byte_unit(largest) if kind == "bytes" else (1, "")
    exact = {"count": lambda v: f"{int(v):,}", "bytes": fmt_bytes, "flops": fmt_flops}[kind]
    text = fmt_count_short if kind == "count" else exact   # 8.03B on the bar, 8,030,261,248 in the hover
    crowded = len(labels) * len(metrics) > CROWDED   # narrow bars: labels turn upright so neighbours never overlap
    fig = go.Figure()
    for i, label in enumerate(labels):
        values = [vs[i] for vs in metrics.values()]
        fig.add_trace(go.Bar(x=list(metrics), y=[v / div for v in values], name=label,
                             marker_color=PIN_COLORS[i % len(PIN_COLORS)], customdata=[exact(v) for v in values],
                             text=[text(v) for v in values], textposition="outside", cliponaxis=False,
                             textangle=-90 if crowded else 0,
                             hovertemplate=f"{label}: %{{customdata}}<extra>%{{x}}</extra>"))
    axis = {"count": "parameters (count)", "bytes": f"memory ({unit})", "flops": "FLOPs per token (FLOP)"}[kind]
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text=axis + (", log scale" if log else ""), type="log" if log else "linear",
                     tickformat={"count": ",d", "bytes": ",~g", "flops": "~s"}[kind], dtick=1 if log else None)
    if kind == "count" and log:   # decades read as people say them: 1M, 100M, 10B (plotly's SI would say 10G)
        positive = [v for vs in metrics.values() for v in vs if v > 0] or [1]
        decades = [10 ** k for k in range(int(math.floor(math.log10(min(positive)))),
                                          int(math.ceil(math.log10(max(positive)))) + 1)]
        fig.update_yaxes(tickvals=decades, ticktext=[fmt_count_short(v) for v in decades])
    positive = [v / div for vs in metrics.values() for v in vs if v > 0] or [1]
    if log:   # headroom above the tallest bar for its label (plotly's autorange ignores outside text)
        fig.update_yaxes(range=[math.log10(min(positive)) - 0.3, math.log10(max(positive)) + (1.0 if crowded else 0.4)])
    else:
        fig.update_yaxes(range=[0, max(positive) * (1.45 if crowded else 1.15)])
    return layout(fig, title, height=420)
