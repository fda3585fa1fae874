"""Figures of a mixture-of-experts training run: router losses per step and the expert-load heatmap. Steps arrive
as StepRecord objects or stored rows with aux_loss, router_z_loss and expert_load (tokens per expert per MoE
layer); dense runs have none and draw nothing."""
from __future__ import annotations

from dataclasses import asdict, is_dataclass
from typing import Any, Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.charts import layout, series_color


def _rows(steps: Sequence[Any]) -> list[Mapping[str, Any]]:
    return [asdict(s) if is_dataclass(s) else s for s in steps]


def has_moe(runs: Mapping[str, Sequence[Any]]) -> bool:
    """Did any run record router losses and expert loads (recorded together, MoE runs only)?"""
    return any(r.get("expert_load") for steps in runs.values() for r in _rows(steps))


def router_losses_figure(runs: Mapping[str, Sequence[Any]]) -> go.Figure:
    """Load-balancing loss (E * sum f_e P_e: k when balanced) and router z-loss per step, one colour per run."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["load-balancing loss (k when balanced)", "router z-loss"])
    for i, (label, steps) in enumerate(runs.items()):
        rows = [r for r in _rows(steps) if r.get("aux_loss") is not None]
        for col, key in ((1, "aux_loss"), (2, "router_z_loss")):
            fig.add_trace(go.Scatter(x=[r["step"] for r in rows], y=[r[key] for r in rows],
                                     mode="lines" if len(rows) > 1 else "markers", name=label, legendgroup=label,
                                     showlegend=col == 1, line=dict(color=series_color(i)),
                                     hovertemplate=f"{label} step %{{x}}: %{{y:.4f}}<extra></extra>"), row=1, col=col)
    fig.update_xaxes(title_text="optimizer step")
    fig.update_yaxes(title_text="aux loss (dimensionless)", row=1, col=1)
    fig.update_yaxes(title_text="mean logsumexp² (nats²)", row=1, col=2)
    return layout(fig, "Router losses (added to the loss with aux_loss_coef and z_loss_coef)", height=380)


def expert_load_figure(steps: Sequence[Any], label: str = "") -> go.Figure:
    """Tokens each expert received in each MoE layer at the last recorded step; the colour scale's midpoint is
    the balanced load N*k/E."""
    rows = [r for r in _rows(steps) if r.get("expert_load")]
    last = rows[-1]
    load = last["expert_load"]
    balanced = sum(load[0]) / len(load[0])
    fig = go.Figure(go.Heatmap(
        z=load, x=[f"expert {e}" for e in range(len(load[0]))], y=[f"MoE layer {i + 1}" for i in range(len(load))],
        colorscale="RdBu_r", zmid=balanced, colorbar=dict(title="tokens"),
        hovertemplate="%{y}, %{x}: %{z:,} tokens<extra></extra>"))
    fig.update_xaxes(title_text="routed expert")
    fig.update_yaxes(title_text="MoE layer", autorange="reversed")
    who = f"{label}, " if label else ""
    return layout(fig, f"Expert load ({who}step {last['step']:,}; balanced = {balanced:,.0f} tokens per expert)",
                  height=max(260, 60 * len(load) + 160))
