"""Figures of the Compare page: grouped bars, one group per metric and one bar per pinned config.

The bars lie down (metrics down the side, values across): each label sits after its bar's end at full size, however
many pins share a half-width chart. Upright bars ~40 px wide had their labels shrunk to ~6 px or turned on end.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from app.charts import FONT, layout
from engine.units import byte_unit, fmt_bytes, fmt_count_short, fmt_flops

PIN_COLORS = ("#4C78A8", "#F58518", "#54A24B", "#E45756")
BAR_PX = 26            # each bar's thickness: the label beside it is FONT size, never shrunk to fit
LABEL_PX = 90          # right margin the longest bar's label may run into ("214.19 GFLOP")
KINDS = ("count", "bytes", "flops")


def _short_bytes(n: float) -> str:
    """A tick label in the binary unit that keeps it between 1 and 1023: 2**25 -> '32 MiB'."""
    div, unit = byte_unit(n)
    return f"{n / div:g} {unit}"


def _short_flops(n: float) -> str:
    return fmt_flops(n, digits=0)   # 1e9 -> '1 GFLOP'


def log_ticks(kind: str, values: list[float]) -> tuple[list[float], list[str]]:
    """Tick values and labels of a log axis over `values`, in the units people say: bytes at powers of two in
    binary units (32 MiB, 1 GiB, 32 GiB: never 0.0001 TiB), counts and FLOPs at powers of ten (100M, 1B;
    1 GFLOP, 10 GFLOP). Four to seven ticks."""
    positive = [v for v in values if v > 0] or [1]
    base, fmt = (2, _short_bytes) if kind == "bytes" else (10, fmt_count_short if kind == "count" else _short_flops)
    lo, hi = (math.floor(math.log(min(positive), base)), math.ceil(math.log(max(positive), base)))
    # powers of two: every 2x, 4x, 32x or 1024x (whole binary units), the finest that gives at most seven ticks
    step = 1 if base == 10 else next((s for s in (1, 2, 5) if (hi - lo) // s < 7), 10 * math.ceil((hi - lo) / 60))
    first = lo - lo % step
    ticks = [base ** k for k in range(first, hi + 1, step)]
    return ticks, [fmt(t) for t in ticks]


def compare_bars(title: str, labels: list[str], metrics: dict[str, list[float]], kind: str,
                 log: bool = False) -> go.Figure:
    """Grouped bars: one group per metric, one bar per pinned config. kind: 'count', 'bytes' or 'flops';
    `log` puts the value axis on a log scale so a 100M and a 70B model are both readable."""
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    everything = [v for vs in metrics.values() for v in vs]
    largest = max(everything, default=1)
    div, unit = byte_unit(largest) if kind == "bytes" and not log else (1, "")
    exact = {"count": lambda v: f"{int(v):,}", "bytes": fmt_bytes, "flops": fmt_flops}[kind]
    text = fmt_count_short if kind == "count" else exact   # 8.03B on the bar, 8,030,261,248 in the hover
    fig = go.Figure()
    for i, label in enumerate(labels):
        values = [vs[i] for vs in metrics.values()]
        fig.add_trace(go.Bar(y=list(metrics), x=[v / div for v in values], name=label, orientation="h",
                             marker_color=PIN_COLORS[i % len(PIN_COLORS)], customdata=[exact(v) for v in values],
                             text=[text(v) for v in values], textposition="outside", cliponaxis=False,
                             constraintext="none", textfont=dict(size=FONT["size"]),
                             hovertemplate=f"{label}: %{{customdata}}<extra>%{{y}}</extra>"))
    what = {"count": "parameters (count)", "bytes": "memory" + (f" ({unit})" if unit else ""),
            "flops": "FLOPs per token" + ("" if log else " (FLOP)")}[kind]
    fig.update_layout(barmode="group", bargap=0.25, legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0))
    fig.update_yaxes(autorange="reversed")   # the first metric on top, the pins in legend order
    positive = [v / div for v in everything if v > 0] or [1]
    if log:   # room after the longest bar for its label (plotly's autorange ignores outside text)
        ticks, names = log_ticks(kind, everything)
        fig.update_xaxes(title_text=what + ", log scale", type="log", tickvals=ticks, ticktext=names,
                         range=[math.log10(min(positive)) - 0.3, math.log10(max(positive)) + 0.3])
    else:
        fig.update_xaxes(title_text=what, tickformat={"count": ",d", "bytes": ",~g", "flops": "~s"}[kind],
                         range=[0, max(positive) * 1.15])
    height = 150 + BAR_PX * len(labels) * len(metrics) / (1 - 0.25)
    layout(fig, title, height=max(300, round(height)))
    return fig.update_layout(margin=dict(t=90, r=LABEL_PX))   # the top for the legend; the right for labels
