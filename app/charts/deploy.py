"""Figures of the Deploy page: per-GPU memory by component against the GPU's memory; memory against context with
every GPU's line; decode tokens/s per user and in all against the batch."""
from __future__ import annotations

import math

import plotly.graph_objects as go

from app.charts import MEMORY_COLORS, layout, series_color
from engine.plan import COMPONENTS
from engine.units import byte_unit, fmt_bytes

_COLORS = {**MEMORY_COLORS, "working_set": "#9D755D"}


def per_gpu_figure(stages: list[dict[str, int]], memory_bytes: int, gpu: str) -> go.Figure:
    """Stacked bars per pipeline stage; the GPU's memory is a dashed line named in the legend, never a label
    over the bars."""
    div, unit = byte_unit(max(max(s["total"] for s in stages), memory_bytes))
    cats = [f"stage {i}" for i in range(len(stages))] if len(stages) > 1 else ["every GPU"]
    fig = go.Figure()
    for name in COMPONENTS:
        values = [s[name] for s in stages]
        fig.add_trace(go.Bar(x=cats, y=[v / div for v in values], name=name.replace("_", " "),
                             marker_color=_COLORS[name], customdata=[fmt_bytes(v) for v in values],
                             hovertemplate=f"{name}: %{{customdata}}<extra>%{{x}}</extra>"))
    fig.add_trace(go.Scatter(x=cats, y=[s["total"] / div for s in stages], mode="text", showlegend=False,
                             text=[fmt_bytes(s["total"]) for s in stages], textposition="top center",
                             hoverinfo="skip"))
    fig.add_hline(y=memory_bytes / div, line_dash="dash", line_color="#333")
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(dash="dash", color="#333"),
                             name=f"{gpu} memory: {fmt_bytes(memory_bytes)}"))
    fig.update_layout(barmode="stack", legend=dict(orientation="h", y=-0.25))
    fig.update_xaxes(title_text="pipeline stage (one GPU of each; data rank 0 holds the largest shards)")
    fig.update_yaxes(title_text=f"memory per GPU ({unit})",
                     range=[0, 1.12 * max(max(s["total"] for s in stages), memory_bytes) / div])
    return layout(fig, "Memory per GPU by component", height=470)


def serving_context_figure(tokens: list[int], need: list[int], lines: dict[str, int],
                           chosen: str) -> go.Figure:
    """Memory one GPU needs for one sequence, against its context (log axis), under a dashed line per GPU kind
    (GPUs of one size share a line and a label); the chosen GPU's line is solid."""
    top = max(max(need), max(lines.values()))
    div, unit = byte_unit(top)
    fig = go.Figure(go.Scatter(x=tokens, y=[n / div for n in need], mode="lines+markers", name="this model",
                               line=dict(color=series_color(0), width=3), customdata=[fmt_bytes(n) for n in need],
                               hovertemplate="%{x:,} tokens: %{customdata}<extra></extra>"))
    sizes: dict[int, list[str]] = {}
    for name, b in lines.items():
        sizes.setdefault(b, []).append(name)
    last, shift = None, 0
    for b, names in sorted(sizes.items()):
        mine = chosen in names
        fig.add_hline(y=b / div, line_dash="solid" if mine else "dot", line_color="#333" if mine else "#999",
                      line_width=2 if mine else 1)
        close = last is not None and (b - last) / top < 0.035       # labels of near lines would overlap
        shift = shift + 13 if close else 0
        last = b
        fig.add_annotation(x=1, xref="paper", xanchor="left", y=b / div, yanchor="middle", yshift=shift,
                           showarrow=False, text=f"{', '.join(names)} ({fmt_bytes(b)})",
                           font=dict(size=12 if mine else 11, color="#222" if mine else "#555"))
    fig.update_xaxes(type="log", title_text="context (tokens, log scale)", tickvals=tokens,
                     ticktext=[f"{t / 1024:g}K" if t >= 1024 else f"{t:,}" for t in tokens])
    fig.update_yaxes(title_text=f"memory per GPU ({unit})", rangemode="tozero")
    fig.update_layout(showlegend=False)
    out = layout(fig, "Memory for one sequence against its context, and what each GPU offers", height=520)
    out.update_layout(margin=dict(l=10, r=230, t=50, b=10))
    return out


def serving_speed_figure(batches: list[int], per_user: list[float], total: list[float], fit: int,
                         context: int) -> go.Figure:
    """Decode tokens/s per user and in all against the batch (log axis); the batches whose KV cache does not fit
    are shaded."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=batches, y=total, mode="lines+markers", name="all users (tokens/s)",
                             line=dict(color=series_color(1), width=3),
                             hovertemplate="batch %{x}: %{y:,.0f} tokens/s in all<extra></extra>"))
    fig.add_trace(go.Scatter(x=batches, y=per_user, mode="lines+markers", name="each user (tokens/s)",
                             line=dict(color=series_color(2), width=3),
                             hovertemplate="batch %{x}: %{y:,.1f} tokens/s each<extra></extra>"))
    if fit < batches[-1]:     # batches whose KV cache does not fit: shaded, the speed they would have
        fig.add_vrect(x0=max(fit, 0.8), x1=batches[-1] * 1.25, fillcolor="#999", opacity=0.15, line_width=0)
    fig.add_annotation(x=0.5, xref="paper", y=1, yref="paper", yanchor="bottom", showarrow=False,
                       text=(f"the KV pool holds {fit:,} sequences of {context:,} tokens (shaded: more than fit)"
                             if fit else f"no sequence of {context:,} tokens fits (shaded)"))
    fig.update_xaxes(type="log", title_text="concurrent sequences (batch, log scale)", tickvals=batches)
    lo, hi = min(per_user + total), max(per_user + total)
    ticks = [m * 10**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)]
    fig.update_yaxes(type="log", title_text="decode tokens/s (log scale)", tickformat=",",
                     tickvals=[t for t in ticks if lo / 2 <= t <= hi * 2])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, f"Decode speed at {context:,} tokens of context", height=470)
