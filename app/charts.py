"""Pure figure builders: engine results -> Plotly figures. No Streamlit here, so tests call them directly.

One colour per component everywhere (COLORS); every axis names its unit.
"""
from __future__ import annotations

import plotly.graph_objects as go

from engine.budget.params import ParamCount

# One colour per model component, used by every page.
COLORS: dict[str, str] = {
    "embeddings": "#4C78A8",
    "positions": "#72B7B2",
    "attention": "#F58518",
    "ffn": "#54A24B",
    "norms": "#B279A2",
    "output_head": "#E45756",
}
# One colour per memory category (training state and inference caches).
MEMORY_COLORS: dict[str, str] = {
    "weights": "#4C78A8",
    "grads": "#E45756",
    "optimizer": "#F58518",
    "master": "#B279A2",
    "activations": "#54A24B",
    "kv_cache": "#72B7B2",
    "logits": "#9D755D",
}
# Which colour group each engine parameter component belongs to.
COMPONENT_GROUP: dict[str, str] = {
    "token_embedding": "embeddings", "positions": "positions",
    "attention_q": "attention", "attention_k": "attention", "attention_v": "attention", "attention_o": "attention",
    "qk_norm": "attention", "ffn": "ffn", "norms": "norms", "output_head": "output_head",
}
LABELS: dict[str, str] = {
    "token_embedding": "token embedding", "positions": "learned positions", "attention_q": "q projection",
    "attention_k": "k projection", "attention_v": "v projection", "attention_o": "o projection",
    "qk_norm": "QK-norm", "ffn": "feed-forward", "norms": "norms", "output_head": "output head",
    "embeddings": "embeddings", "attention": "attention", "output_head_group": "output head",
}
FONT = dict(size=14)


def _layout(fig: go.Figure, title: str, **kw) -> go.Figure:
    fig.update_layout(title=title, font=FONT, margin=dict(l=10, r=10, t=50, b=10), **kw)
    return fig


def params_sunburst(pc: ParamCount) -> go.Figure:
    """Where the parameters live: component groups, then the engine's components inside each group."""
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
    fig = go.Figure(go.Sunburst(ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
                                marker=dict(colors=colors), hovertemplate="%{label}<br>%{value:,} parameters"
                                "<br>%{percentRoot:.1%} of total<extra></extra>", texttemplate="%{label}<br>"
                                "%{percentRoot:.1%}"))
    return _layout(fig, f"Where the {pc.total:,} parameters live")
