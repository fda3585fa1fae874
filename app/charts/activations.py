"""Figures of the Activations page: the engine's activation curves and gated surface, and the live statistics of a
built model (residual RMS, attention entropy, one attention map)."""
from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.charts import ACTIVATION_COLORS, COLORS, layout
from engine.activation_grid import Curve, Surface


def values_and_slopes_figure(curves: dict[str, Curve], title: str) -> go.Figure:
    """Values (left) and autograd derivatives (right) of engine.activation_grid.Curve objects; hover shows
    every curve's value at the same x."""
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
    return layout(fig, title, hovermode="x unified", height=420)


def gated_surface_figure(surface: Surface) -> go.Figure:
    """act(g)·u as a heatmap over gate input g and up input u (engine.activation_grid.Surface)."""
    fig = go.Figure(go.Heatmap(x=surface.g, y=surface.u, z=surface.z, colorscale="RdBu", zmid=0,
                               colorbar=dict(title="output"),
                               hovertemplate="g=%{x:.2f}, u=%{y:.2f}<br>output %{z:.3f}<extra></extra>"))
    fig.update_xaxes(title_text="gate input g (dimensionless)")
    fig.update_yaxes(title_text="up input u (dimensionless)")
    return layout(fig, f"{surface.name}: the gate scales the linear up value", height=420)


# ---- live statistics ---------------------------------------------------------------------------------------
def residual_rms_figure(rms: list[float]) -> go.Figure:
    fig = go.Figure(go.Scatter(x=list(range(len(rms))), y=rms, mode="lines+markers",
                               line=dict(color=COLORS["attention"]),
                               hovertemplate="after %{x}: RMS %{y:.4f}<extra></extra>"))
    fig.update_xaxes(title_text="layer (0 = after embeddings, i = after block i)", dtick=1 if len(rms) <= 40 else None)
    fig.update_yaxes(title_text="residual RMS (activation units)", rangemode="tozero")
    return layout(fig, "Residual stream RMS per layer", height=380)


def entropy_figure(entropy: list[list[float]], uniform: list[float], tokens: int) -> go.Figure:
    """Heatmap of mean attention entropy per layer and head, hover shows the uniform-attention reference. The
    colour scale is fixed from 0 (one key) to ln T (uniform over all T keys), so the small spread of an untrained
    model's heads stays one colour instead of being stretched into apparent structure."""
    custom = [[u] * len(row) for row, u in zip(entropy, uniform)]
    fig = go.Figure(go.Heatmap(z=entropy, customdata=custom, colorscale="Viridis", zmin=0, zmax=math.log(tokens),
                               colorbar=dict(title="nats", tickvals=[0, math.log(tokens)],
                                             ticktext=["0", f"ln {tokens:,} = {math.log(tokens):.2f}"]),
                               hovertemplate="layer %{y}, head %{x}<br>entropy %{z:.3f} nats"
                               "<br>uniform %{customdata:.3f} nats<extra></extra>"))
    fig.update_xaxes(title_text="head")
    fig.update_yaxes(title_text="layer", autorange="reversed")
    return layout(fig, "Attention entropy per head (mean over queries)", height=380)


def attention_map_figure(probs: list[list[float]], layer: int, head: int) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=probs, colorscale="Blues", zmin=0, colorbar=dict(title="probability"),
                               hovertemplate="query %{y} → key %{x}<br>p = %{z:.4f}<extra></extra>"))
    fig.update_xaxes(title_text="key position (token)")
    fig.update_yaxes(title_text="query position (token)", autorange="reversed")
    return layout(fig, f"Attention probabilities, layer {layer}, head {head}", height=420)
