"""Figure of the Deploy page: each pipeline stage's per-GPU memory stacked by component, against the GPU's memory."""
from __future__ import annotations

import plotly.graph_objects as go

from app.charts import MEMORY_COLORS, layout
from engine.plan import COMPONENTS
from engine.units import byte_unit, fmt_bytes

_COLORS = {**MEMORY_COLORS, "working_set": "#9D755D"}


def per_gpu_figure(stages: list[dict[str, int]], memory_bytes: int, gpu: str) -> go.Figure:
    div, unit = byte_unit(max(max(s["total"] for s in stages), memory_bytes))
    cats = [f"stage {i}" for i in range(len(stages))] if len(stages) > 1 else ["every GPU"]
    fig = go.Figure()
    for name in COMPONENTS:
        values = [s[name] for s in stages]
        fig.add_trace(go.Bar(x=cats, y=[v / div for v in values], name=name.replace("_", " "),
                             marker_color=_COLORS[name], customdata=[fmt_bytes(v) for v in values],
                             hovertemplate=f"{name}: %{{customdata}}<extra>%{{x}}</extra>"))
    fig.add_hline(y=memory_bytes / div, line_dash="dash", annotation_text=f"{gpu}: {fmt_bytes(memory_bytes)}")
    fig.add_trace(go.Scatter(x=cats, y=[s["total"] / div for s in stages], mode="text", showlegend=False,
                             text=[fmt_bytes(s["total"]) for s in stages], textposition="top center",
                             hoverinfo="skip"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="pipeline stage (one GPU of each; data rank 0 holds the largest shards)")
    fig.update_yaxes(title_text=f"memory per GPU ({unit})", rangemode="tozero")
    return layout(fig, "Memory per GPU by component", height=440)
