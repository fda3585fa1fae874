"""Pure figure builders: engine results -> Plotly figures. No Streamlit here, so tests call them directly.

One colour per component everywhere (COLORS); every axis names its unit.
"""
from __future__ import annotations

import plotly.graph_objects as go

from engine.activation_grid import Curve, Surface
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
    return _layout(fig, f"Where the {pc.total:,} parameters live", height=460)


# ---- activations -----------------------------------------------------------------------------------------
ACTIVATION_COLORS = {"relu": "#4C78A8", "gelu": "#F58518", "gelu_tanh": "#E45756", "silu": "#54A24B",
                     "reglu": "#9D755D", "geglu": "#B279A2", "geglu_tanh": "#FF9DA6", "swiglu": "#17BECF"}


def activation_figure(curves: dict[str, Curve], title: str) -> go.Figure:
    """Values (left) and autograd derivatives (right) of engine.activation_grid.Curve objects; hover shows
    every curve's value at the same x."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("value y(x)", "derivative dy/dx"), horizontal_spacing=0.08)
    for c in curves.values():
        color = ACTIVATION_COLORS.get(c.name)
        for col, ys in ((1, c.y), (2, c.dy)):
            fig.add_trace(go.Scatter(x=c.x, y=ys, name=c.name, legendgroup=c.name, showlegend=col == 1,
                                     line=dict(color=color, dash="solid" if col == 1 else "dot"),
                                     hovertemplate=f"{c.name}: %{{y:.4f}}<extra>{c.formula}</extra>"),
                          row=1, col=col)
    fig.update_xaxes(title_text="input x (pre-activation, dimensionless)", zeroline=True)
    fig.update_yaxes(title_text="output (dimensionless)", row=1, col=1)
    fig.update_yaxes(title_text="slope (output per unit input)", row=1, col=2)
    return _layout(fig, title, hovermode="x unified", height=420)


def gated_surface_figure(surface: Surface) -> go.Figure:
    """act(g)·u as a heatmap over gate input g and up input u (engine.activation_grid.Surface)."""
    fig = go.Figure(go.Heatmap(x=surface.g, y=surface.u, z=surface.z, colorscale="RdBu", zmid=0,
                               colorbar=dict(title="output"),
                               hovertemplate="g=%{x:.2f}, u=%{y:.2f}<br>output %{z:.3f}<extra></extra>"))
    fig.update_xaxes(title_text="gate input g (dimensionless)")
    fig.update_yaxes(title_text="up input u (dimensionless)")
    return _layout(fig, f"{surface.name}: the gate scales the linear up value", height=420)


# ---- live statistics ---------------------------------------------------------------------------------------
def residual_rms_figure(rms: list[float]) -> go.Figure:
    fig = go.Figure(go.Scatter(x=list(range(len(rms))), y=rms, mode="lines+markers",
                               line=dict(color=COLORS["attention"]),
                               hovertemplate="after %{x}: RMS %{y:.4f}<extra></extra>"))
    fig.update_xaxes(title_text="layer (0 = after embeddings, i = after block i)", dtick=1 if len(rms) <= 40 else None)
    fig.update_yaxes(title_text="residual RMS (activation units)", rangemode="tozero")
    return _layout(fig, "Residual stream RMS per layer", height=380)


def entropy_figure(entropy: list[list[float]], uniform: list[float]) -> go.Figure:
    """Heatmap of mean attention entropy per layer and head, hover shows the uniform-attention reference."""
    custom = [[u] * len(row) for row, u in zip(entropy, uniform)]
    fig = go.Figure(go.Heatmap(z=entropy, customdata=custom, colorscale="Viridis", colorbar=dict(title="nats"),
                               hovertemplate="layer %{y}, head %{x}<br>entropy %{z:.3f} nats"
                               "<br>uniform %{customdata:.3f} nats<extra></extra>"))
    fig.update_xaxes(title_text="head")
    fig.update_yaxes(title_text="layer", autorange="reversed")
    return _layout(fig, "Attention entropy per head (mean over queries)", height=380)


def attention_map_figure(probs: list[list[float]], layer: int, head: int) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=probs, colorscale="Blues", zmin=0, colorbar=dict(title="probability"),
                               hovertemplate="query %{y} → key %{x}<br>p = %{z:.4f}<extra></extra>"))
    fig.update_xaxes(title_text="key position (token)")
    fig.update_yaxes(title_text="query position (token)", autorange="reversed")
    return _layout(fig, f"Attention probabilities, layer {layer}, head {head}", height=420)
