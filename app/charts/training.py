"""Figures of the Training page: loss, optimizer diagnostics and speed. Training steps arrive as mappings with the
StepRecord fields (a live run's records or a stored run's rows)."""
from __future__ import annotations

from dataclasses import asdict, is_dataclass
from typing import Any, Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.charts import layout, series_color


def _mode(n: int) -> str:
    """A one-point curve (a run that diverged at its second step) still shows as a marker."""
    return "lines" if n > 1 else "markers"


def _rows(steps: Sequence[Any]) -> list[Mapping[str, Any]]:
    return [asdict(s) if is_dataclass(s) else s for s in steps]


def loss_figure(runs: Mapping[str, Sequence[Any]]) -> go.Figure:
    """Train loss per step (line) and val loss where evaluated (markers), one colour per run."""
    fig = go.Figure()
    for i, (label, steps) in enumerate(runs.items()):
        rows = _rows(steps)
        fig.add_trace(go.Scatter(x=[r["step"] for r in rows], y=[r["train_loss"] for r in rows], mode=_mode(len(rows)),
                                 name=f"{label} train", legendgroup=label, line=dict(color=series_color(i)),
                                 hovertemplate=f"{label} step %{{x}}: train %{{y:.4f}} nats<extra></extra>"))
        val = [r for r in rows if r["val_loss"] is not None]
        fig.add_trace(go.Scatter(x=[r["step"] for r in val], y=[r["val_loss"] for r in val], mode="lines+markers",
                                 name=f"{label} val", legendgroup=label,
                                 line=dict(color=series_color(i), dash="dash"), marker=dict(size=8),
                                 hovertemplate=f"{label} step %{{x}}: val %{{y:.4f}} nats<extra></extra>"))
    fig.update_xaxes(title_text="optimizer step")
    fig.update_yaxes(title_text="cross-entropy loss (nats per token)")
    return layout(fig, "Loss", height=420, hovermode="x")


DIAGNOSTICS = (("lr", "learning rate"), ("grad_norm", "gradient norm (before clipping)"),
               ("max_logit", "largest logit"), ("log_z", "mean log Z (nats)"))


def diagnostics_figure(runs: Mapping[str, Sequence[Any]]) -> go.Figure:
    """lr schedule, gradient norm, max logit and log Z per step: the quantities z-loss and soft-capping act on."""
    fig = make_subplots(rows=2, cols=2, subplot_titles=[t for _, t in DIAGNOSTICS], vertical_spacing=0.15)
    for i, (label, steps) in enumerate(runs.items()):
        rows = _rows(steps)
        for k, (key, title) in enumerate(DIAGNOSTICS):
            fig.add_trace(go.Scatter(x=[r["step"] for r in rows], y=[r[key] for r in rows], mode=_mode(len(rows)),
                                     name=label, legendgroup=label, showlegend=k == 0, line=dict(color=series_color(i)),
                                     hovertemplate=f"{label} step %{{x}}: {title} %{{y:.4g}}<extra></extra>"),
                          row=k // 2 + 1, col=k % 2 + 1)
    fig.update_xaxes(title_text="optimizer step")
    fig.update_yaxes(title_text="lr (per step)", row=1, col=1)
    fig.update_yaxes(title_text="L2 norm", row=1, col=2)
    fig.update_yaxes(title_text="logit (nats)", row=2, col=1)
    fig.update_yaxes(title_text="log Z (nats)", row=2, col=2)
    return layout(fig, "Optimizer and logit diagnostics", height=560)


def speed_figure(tokens_per_s: Mapping[str, float], noisy: Mapping[str, bool] | None = None) -> go.Figure:
    """Median-step training throughput per run (A/B: same data, same seed, run one after the other); a run whose
    steps were too spread to compare is labelled noisy."""
    labels, noisy = list(tokens_per_s), noisy or {}
    text = [f"{tokens_per_s[k]:,.0f} tokens/s" + (" (noisy)" if noisy.get(k) else "") for k in labels]
    fig = go.Figure(go.Bar(x=labels, y=[tokens_per_s[k] for k in labels], text=text,
                           marker_color=[series_color(i) for i in range(len(labels))],
                           textposition="outside", cliponaxis=False,
                           hovertemplate="%{x}: %{y:,.0f} tokens/s (median step)<extra></extra>"))
    fig.update_yaxes(title_text="training throughput, median step (tokens/s)", tickformat=",~g", rangemode="tozero")
    return layout(fig, "Training speed (median step)", height=320)
