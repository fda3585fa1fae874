"""Pure figure builders for trade-off sweeps (tested without Streamlit): small multiples, one panel per metric
against the knob, and a Pareto chart of any metric against any other with every point labelled."""
from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.charts import FONT, series_color
from engine.sweep import METRICS, pareto_front, value_label
from engine.sweep.measured import MEASURED
from engine.units import byte_unit, fmt_bytes, fmt_count, fmt_flops

ALL_METRICS = {**METRICS, **MEASURED}
FRONT, OTHER = series_color(3), "#9AA5B1"       # the Pareto front in red, dominated points grey
_COUNT_SCALE = ((1e12, "trillions"), (1e9, "billions"), (1e6, "millions"), (1e3, "thousands"))
_FLOP_SCALE = ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "KFLOP"))


def axis_scale(unit: str, values: list[float]) -> tuple[float, str]:
    """(divisor, unit text) for an axis whose largest value is max(values): bytes in binary units, FLOPs in
    engineering units, parameter counts in millions/billions."""
    top = max((abs(v) for v in values if v is not None), default=0)
    if unit == "bytes":
        return byte_unit(top)
    if unit == "FLOP":
        return next(((d, name) for d, name in _FLOP_SCALE if top >= d), (1, "FLOP"))
    if unit == "parameters":
        return next(((d, f"{name} of parameters") for d, name in _COUNT_SCALE if top >= d), (1, "parameters"))
    return 1, unit


def fmt_metric(key: str, value: float | None) -> str:
    if value is None:
        return "—"
    unit = ALL_METRICS[key].unit
    return {"bytes": fmt_bytes, "FLOP": fmt_flops, "parameters": fmt_count,
            "ms": lambda v: f"{v:,.3f} ms", "nats": lambda v: f"{v:.4f} nats"}[unit](value)


def point_label(row: dict[str, Any], knobs: tuple[str, ...]) -> str:
    return ", ".join(value_label(k, row[k]) for k in knobs)


def _series(rows: list[dict], knobs: tuple[str, ...]) -> dict[str, list[dict]]:
    """Rows grouped by the second knob's value (one line each); a single group for one knob."""
    if len(knobs) < 2:
        return {"": rows}
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(f"{knobs[1]}={value_label(knobs[1], r[knobs[1]])}", []).append(r)
    return groups


def _title(text: str, note: str) -> dict:
    return dict(text=text, subtitle=dict(text=note, font=dict(size=FONT["size"] - 1))) if note else dict(text=text)


def small_multiples(rows: list[dict], knobs: tuple[str, ...], metrics: list[str], cols: int = 3,
                    title: str = "", note: str = "") -> go.Figure:
    """One panel per metric with the first knob on x (its values in sweep order) and, with a second knob, one
    coloured line per value of it. Invalid points have no marker (the page lists them with their reason).
    `note`: a second title line (what is held)."""
    n = max(1, len(metrics))
    cols = min(cols, n)
    nrows = math.ceil(n / cols)
    scales = {m: axis_scale(ALL_METRICS[m].unit, [r.get(m) for r in rows]) for m in metrics}
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=[ALL_METRICS[m].label for m in metrics],
                        horizontal_spacing=0.08, vertical_spacing=0.5 / nrows if nrows > 1 else 0.1)
    order = list(dict.fromkeys(value_label(knobs[0], r[knobs[0]]) for r in rows))
    for s, (name, group) in enumerate(_series(rows, knobs).items()):
        color = series_color(s)
        for i, m in enumerate(metrics):
            div, _ = scales[m]
            shown = [r for r in group if r.get(m) is not None]
            fig.add_trace(go.Scatter(
                x=[value_label(knobs[0], r[knobs[0]]) for r in shown], y=[r[m] / div for r in shown],
                mode="lines+markers", name=name or ALL_METRICS[m].label, legendgroup=name,
                showlegend=bool(name) and i == 0, line=dict(color=color), marker=dict(size=9),
                customdata=[fmt_metric(m, r[m]) for r in shown],
                hovertemplate=f"{knobs[0]}=%{{x}}{' ' + name if name else ''}<br>%{{customdata}}<extra></extra>"),
                row=i // cols + 1, col=i % cols + 1)
    for i, m in enumerate(metrics):
        r, c = i // cols + 1, i % cols + 1
        bottom = i + cols >= n   # the knob's name under the lowest panel of each column only: the title names it
        fig.update_xaxes(title_text=knobs[0] if bottom else None, type="category", categoryorder="array",
                         categoryarray=order, row=r, col=c)
        # the unit alone ("billions", "GiB"): the panel's title names the metric, and a long vertical title at
        # projector size ran past its panel into the neighbours
        fig.update_yaxes(title_text=scales[m][1].removesuffix(" of parameters"), rangemode="tozero",
                         tickformat=",~r", row=r, col=c)
    fig.update_layout(title=_title(title, note), font=FONT, height=330 * nrows + 60,
                      margin=dict(l=10, r=10, t=100 if note else 80, b=10),
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"))
    return fig


SIZE_UNITS = ("parameters", "bytes", "FLOP")   # sizes: their axes start at zero; measured ones zoom to the data


def pareto_figure(rows: list[dict], knobs: tuple[str, ...], x: str, y: str, title: str = "",
                  note: str = "") -> go.Figure:
    """Every point with both metrics, labelled with its knob values; the Pareto front (nothing beats it on both,
    lower is better) in colour and joined by a line, the rest grey. Axes of sizes (parameters, bytes, FLOPs)
    start at zero, as the panels do: an axis zoomed to its data would blow a count held equal up to the full
    height (d_ff's rounding moves a held total by under 1%). `note`: a second title line (what is held)."""
    have = [i for i, r in enumerate(rows) if r.get(x) is not None and r.get(y) is not None]
    front = pareto_front(rows, x, y)
    (xd, xu), (yd, yu) = (axis_scale(ALL_METRICS[k].unit, [rows[i][k] for i in have]) for k in (x, y))
    fig = go.Figure()
    for name, idx, color in (("dominated", [i for i in have if i not in front], OTHER),
                             ("Pareto front", sorted(front, key=lambda i: rows[i][x]), FRONT)):
        if not idx:
            continue
        fig.add_trace(go.Scatter(
            x=[rows[i][x] / xd for i in idx], y=[rows[i][y] / yd for i in idx], name=name,
            mode="lines+markers+text" if name == "Pareto front" and len(idx) > 1 else "markers+text",
            text=[point_label(rows[i], knobs) for i in idx], textposition="top center",
            marker=dict(size=12, color=color), line=dict(color=color, dash="dot"),
            customdata=[[fmt_metric(x, rows[i][x]), fmt_metric(y, rows[i][y])] for i in idx],
            hovertemplate="%{text}<br>" + f"{ALL_METRICS[x].label}: %{{customdata[0]}}<br>"
                          f"{ALL_METRICS[y].label}: %{{customdata[1]}}<extra></extra>"))
    for update, key, unit in ((fig.update_xaxes, x, xu), (fig.update_yaxes, y, yu)):
        update(title_text=f"{ALL_METRICS[key].label} ({unit})", tickformat=",~r",
               rangemode="tozero" if ALL_METRICS[key].unit in SIZE_UNITS else "normal")
    title = title or f"{ALL_METRICS[y].label} vs {ALL_METRICS[x].label} (lower is better on both)"
    fig.update_layout(title=_title(title, note), font=FONT, height=520, margin=dict(l=10, r=10, t=80 if note else 60, b=10),
                      legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right"))
    return fig
