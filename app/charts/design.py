"""Figures of the Design page: where the parameters live, and how RoPE scaling changes the rotation frequencies."""
from __future__ import annotations

import plotly.graph_objects as go

from app.charts import COLORS, COMPONENT_GROUP, LABELS, layout
from engine.budget.params import ParamCount


def params_treemap(pc: ParamCount) -> go.Figure:
    """Where the parameters live: component groups (coloured by COLORS), the engine's components inside."""
    ids, labels, parents, values, colors = [], [], [], [], []
    for group, color in COLORS.items():
        members = {k: v for k, v in pc.components.items() if COMPONENT_GROUP[k] == group and v}
        if not members:
            continue
        ids.append(group)
        labels.append(LABELS.get(group, group.replace("_", " ")))
        parents.append("")
        values.append(sum(members.values()))
        colors.append(color)
        if len(members) > 1:
            for name, n in members.items():
                ids.append(f"{group}/{name}")
                labels.append(LABELS[name])
                parents.append(group)
                values.append(n)
                colors.append(color)
    fig = go.Figure(go.Treemap(ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
                               marker=dict(colors=colors), tiling=dict(pad=2),
                               hovertemplate="%{label}<br>%{value:,} parameters<br>%{percentRoot:.1%} of total"
                               "<extra></extra>", texttemplate="<b>%{label}</b><br>%{value:,}<br>%{percentRoot:.1%}"))
    return layout(fig, f"Where the {pc.total:,} parameters live", height=460)


def rope_frequency_chart(original: list[float], scaled: list[float], scaling: str, tokens: int) -> go.Figure:
    """Rotation frequency (radians per token, log scale) of each rotating dimension pair, before and after the
    config's RoPE scaling at a sequence of `tokens`."""
    pairs = list(range(len(original)))
    fig = go.Figure([go.Scatter(x=pairs, y=original, mode="lines+markers", name="original (no scaling)",
                                line=dict(color=COLORS["positions"])),
                     go.Scatter(x=pairs, y=scaled, mode="lines+markers", name=f"scaled ({scaling}, {tokens:,} tokens)",
                                line=dict(color=COLORS["attention"], dash="dash"))])
    fig.update_traces(hovertemplate="pair %{x}<br>%{y:.3g} rad/token<extra></extra>")
    fig.update_xaxes(title="dimension pair i (dimensions 2i, 2i+1 of the rotating part)")
    fig.update_yaxes(title="rotation frequency (radians per token, log)", type="log", exponentformat="power")
    return layout(fig, "RoPE rotation frequency per dimension pair", height=360)
