"""Figures of the Design page: where the parameters live."""
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
