"""Figures of the Budgets page: memory per precision policy, KV cache vs context, FLOPs split and the roofline.

Byte axes use one binary unit chosen from the largest value (KiB, MiB, GiB, TiB); FLOP axes use SI prefixes.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from app.charts import COLORS, MEMORY_COLORS, layout
from engine.budget.context_memory import ContextMemory, Crossing
from engine.budget.devices import DeviceProfile, Roofline, fmt_ratio
from engine.budget.flops import FlopBudget
from engine.budget.memory import MemoryBudget
from engine.units import byte_unit, fmt_bytes, fmt_flops

TRAIN_TERMS = (("weights", "weights_bytes"), ("grads", "grads_bytes"), ("optimizer", "optimizer_bytes"),
               ("master", "master_bytes"), ("activations", "activations_bytes"))


OPTIMIZER_NAMES = {"adamw": "AdamW: 2 states", "sgd-momentum": "SGD with momentum: 1 state",
                   "sgd": "plain SGD: no state"}


def memory_figure(train: dict[str, MemoryBudget], infer: MemoryBudget, infer_label: str,
                  optimizer: str = "adamw") -> go.Figure:
    """Stacked training memory per precision policy with `optimizer`'s state, and an inference bar (weights + KV
    cache)."""
    largest = max([b.train_total_bytes for b in train.values()] + [infer.infer_total_bytes])
    div, unit = byte_unit(largest)
    cats = list(train) + [infer_label]
    fig = go.Figure()
    for name, attr in TRAIN_TERMS:
        values = [getattr(b, attr) for b in train.values()] + [infer.weights_bytes if name == "weights" else 0]
        fig.add_trace(go.Bar(x=cats, y=[v / div for v in values], name=name, marker_color=MEMORY_COLORS[name],
                             customdata=[fmt_bytes(v) for v in values],
                             hovertemplate=f"{name}: %{{customdata}}<extra>%{{x}}</extra>"))
    kv = [0] * len(train) + [infer.kv_cache_bytes]
    fig.add_trace(go.Bar(x=cats, y=[v / div for v in kv], name="KV cache", marker_color=MEMORY_COLORS["kv_cache"],
                         customdata=[fmt_bytes(v) for v in kv],
                         hovertemplate="KV cache: %{customdata}<extra>%{x}</extra>"))
    totals = [b.train_total_bytes for b in train.values()] + [infer.infer_total_bytes]
    fig.add_trace(go.Scatter(x=cats, y=[t / div for t in totals], mode="text", text=[fmt_bytes(t) for t in totals],
                             textposition="top center", showlegend=False, hoverinfo="skip"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text=f"training precision policy ({OPTIMIZER_NAMES.get(optimizer, optimizer)}, one step)"
                                " | inference")
    fig.update_yaxes(title_text=f"memory ({unit})", rangemode="tozero")
    return layout(fig, "Memory per precision policy", height=460)


def kv_vs_context_figure(tokens: list[int], series: dict[str, list[int]], current: str) -> go.Figure:
    """KV cache bytes against context length, one line per attention variant; the current config is bold."""
    div, unit = byte_unit(max(max(v) for v in series.values()))
    fig = go.Figure()
    for label, values in series.items():
        fig.add_trace(go.Scatter(x=tokens, y=[v / div for v in values], name=label, mode="lines",
                                 line=dict(width=4 if label == current else 2, dash="solid" if label == current
                                           else "dash"), customdata=[fmt_bytes(v) for v in values],
                                 hovertemplate=f"{label}: %{{customdata}}<extra>%{{x:,}} tokens</extra>"))
    fig.update_xaxes(title_text="context length (tokens)", tickformat=",")
    fig.update_yaxes(title_text=f"KV cache ({unit})", rangemode="tozero")
    return layout(fig, "KV cache vs context length", height=420, hovermode="x unified")


def context_memory_figure(m: ContextMemory, dense: ContextMemory | None, marks: list[Crossing],
                          zoom: bool = False) -> go.Figure:
    """Inference memory against context, stacked: weights (flat), recurrent state (flat), KV cache of the attention
    layers (growing); `dense` (the same model with every mixer attention) as a dashed total; each device's memory
    as a dotted line, marked where each model crosses it. `zoom`: the y axis starts just below the weights, so a
    cache small beside them shows (the axis title says so)."""
    top = max(m.totals + (dense.totals if dense else ()))
    near = 1.15 if zoom else 2     # device lines near the data show; zoomed in, only those just above it
    top = max([top] + [c.memory_bytes for c in marks if c.memory_bytes <= near * top])
    div, unit = byte_unit(top)
    x = list(m.tokens)
    fig = go.Figure()
    for name, values, color in (("weights", [m.weights] * len(x), MEMORY_COLORS["weights"]),
                                ("recurrent + conv state", [m.state] * len(x), MEMORY_COLORS["logits"]),
                                ("KV cache (attention layers)", m.kv, MEMORY_COLORS["kv_cache"])):
        if name.startswith("recurrent") and not m.state:
            continue
        fig.add_trace(go.Scatter(x=x, y=[v / div for v in values], name=name, mode="lines", stackgroup="memory",
                                 line=dict(width=0.5, color=color), fillcolor=color,
                                 customdata=[fmt_bytes(v) for v in values],
                                 hovertemplate=f"{name}: %{{customdata}}<extra>%{{x:,}} tokens</extra>"))
    fig.add_trace(go.Scatter(x=x, y=[t / div for t in m.totals], name="total", mode="lines",
                             line=dict(color="#222222", width=2), customdata=[fmt_bytes(t) for t in m.totals],
                             hovertemplate="total: %{customdata}<extra>%{x:,} tokens</extra>"))
    if dense is not None:
        fig.add_trace(go.Scatter(x=x, y=[t / div for t in dense.totals], name="same model, every mixer attention",
                                 mode="lines", line=dict(color=COLORS["attention"], width=3, dash="dash"),
                                 customdata=[fmt_bytes(t) for t in dense.totals],
                                 hovertemplate="every mixer attention: %{customdata}<extra>%{x:,} tokens</extra>"))
    for c in marks:
        y = c.memory_bytes / div
        fig.add_trace(go.Scatter(x=[x[0], x[-1]], y=[y, y], mode="lines",
                                 name=f"{c.device}: {fmt_bytes(c.memory_bytes)}",
                                 line=dict(color="#888888", width=1, dash="dot"), legendgroup=c.device,
                                 hovertemplate=f"{c.device}: {fmt_bytes(c.memory_bytes)}<extra></extra>"))
        other = c.all_attention_tokens if dense else None
        for tokens, symbol, who in ((c.tokens, "x", "this model"), (other, "circle-open", "every mixer attention")):
            if tokens is not None:
                fig.add_trace(go.Scatter(x=[max(tokens, x[0])], y=[y], mode="markers", showlegend=False,
                                         legendgroup=c.device, marker=dict(size=12, symbol=symbol, color="#222222"),
                                         hovertemplate=f"{who} crosses {c.device} at {tokens:,} tokens"
                                         + (" (the weights alone do not fit)" if tokens == 0 else "")
                                         + "<extra></extra>"))
    fig.update_xaxes(title_text="context length (tokens)", tickformat=",")
    low = 0.0
    if zoom:
        low = min([m.weights] + ([dense.weights] if dense else [])) / div
        low -= 0.1 * (top / div - low)
    fig.update_yaxes(title_text=f"inference memory ({unit}{', axis from ' + f'{low:,.1f}' if zoom else ''})",
                     range=[low, top / div + 0.08 * (top / div - low)])
    return layout(fig, "Inference memory vs context: weights, KV cache and state", height=480, hovermode="closest")


def flops_figure(fb: FlopBudget) -> go.Figure:
    """One training step split into forward weight matmuls, forward attention and backward."""
    parts = [("forward: weight matmuls", fb.matmul_flops, COLORS["ffn"]),
             ("forward: attention QKᵀ and PV", fb.attention_flops, COLORS["attention"]),
             ("backward (2 x forward)", fb.backward_flops, COLORS["output_head"])]
    fig = go.Figure()
    for name, value, color in parts:
        fig.add_trace(go.Bar(x=["training step"], y=[value], name=name, marker_color=color,
                             customdata=[fmt_flops(value)], hovertemplate=f"{name}: %{{customdata}}<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title_text="FLOPs per step (FLOP)", tickformat="~s")
    return layout(fig, f"FLOPs split: {fmt_flops(fb.train_flops)} per step", height=420)


def flops_rules_figure(fb: FlopBudget, full: FlopBudget | None = None) -> go.Figure:
    """Counted FLOPs per token beside the 6N and PaLM rules of thumb; with `full` (the full-square count of the
    same step), that count too, so the causal/window saving is visible."""
    counted = "counted: causal/window pairs" if fb.causal else "counted: full T×T square"
    names, values = [counted], [fb.flops_per_token]
    if full is not None:
        names, values = names + ["counted: full T×T square (FlopCounterMode)"], values + [full.flops_per_token]
    names, values = (names + ["Kaplan 6N (non-embedding N)", "PaLM 6N + 12·L·H·Q·T (all N)"],
                     values + [fb.six_n_per_token, fb.palm_per_token])
    colors = [COLORS["attention"]] + ([COLORS["ffn"]] if full is not None else []) + ["#9D9D9D", "#6E6E6E"]
    fig = go.Figure(go.Bar(x=names, y=values, marker_color=colors,
                           text=[fmt_flops(v) for v in values], textposition="outside", cliponaxis=False,
                           hovertemplate="%{x}: %{text}<extra></extra>"))
    fig.update_yaxes(title_text="training FLOPs per token (FLOP)", tickformat="~s", rangemode="tozero")
    return layout(fig, "Per token: counted vs rules of thumb", height=420)


def roofline_figure(profile: DeviceProfile, points: dict[str, Roofline], dtype: str) -> go.Figure:
    """Log-log roofline of the device (attainable FLOP/s vs FLOPs per byte) with prefill and decode placed, each
    named with its verdict in the legend (texts beside the markers lay on the roof line and on each other); the
    ridge's label above the roof's corner, leaning away from the nearer edge."""
    peak, bw = profile.peak_flops[dtype], profile.mem_bandwidth
    xs = [10 ** (k / 8) for k in range(-16, 41)]      # 0.01 .. 1e5 FLOP/byte
    intens = [p.flops_per_byte for p in points.values()]
    xs = sorted(set(xs + [peak / bw] + intens))
    lo, hi = math.log10(min(xs)), math.log10(max(xs))

    fig = go.Figure(go.Scatter(x=xs, y=[min(peak, x * bw) for x in xs], mode="lines", name=f"{profile.name} roof",
                               line=dict(color="#444444", width=3),
                               hovertemplate="%{x:.3g} FLOP/B → %{y:.3s}FLOP/s<extra>roof</extra>"))
    for phase, p in points.items():
        fig.add_trace(go.Scatter(x=[p.flops_per_byte], y=[p.attainable_flops], mode="markers",
                                 name=f"{phase}: {p.bound}-bound",
                                 marker=dict(size=14, color=COLORS["attention"] if phase == "prefill"
                                             else COLORS["positions"]),
                                 hovertemplate=f"{p.verdict}<br>attainable {fmt_flops(p.attainable_flops, 'FLOP/s')}"
                                 f"<br>time ≥ {p.time_s * 1e3:.3g} ms<extra></extra>"))
    ridge = peak / bw     # a trace, not add_vline: shapes on log axes take log10 coordinates
    fig.add_trace(go.Scatter(x=[ridge, ridge], y=[min(xs) * bw, peak], mode="lines", name="ridge point",
                             line=dict(color="#888888", dash="dot"),
                             hovertemplate=f"ridge {fmt_ratio(ridge)} FLOP/B<extra></extra>"))
    right = math.log10(ridge) > lo + 0.6 * (hi - lo)   # near the right edge the label grows leftwards
    fig.add_annotation(x=math.log10(ridge), y=math.log10(peak), text=f"ridge {fmt_ratio(ridge)} FLOP/B",
                       showarrow=False, yanchor="bottom", yshift=6, xanchor="right" if right else "left",
                       font=dict(color="#666666"))
    fig.update_xaxes(type="log", title_text="arithmetic intensity (FLOP per byte moved)", dtick=1, tickformat=",~g",
                     range=[lo, hi])
    fig.update_yaxes(type="log", title_text="attainable throughput (FLOP/s)", tickformat="~s",
                     range=[math.log10(min(xs) * bw), math.log10(peak) + 0.5])   # room above the ridge label
    return layout(fig, f"Roofline: {profile.name}, {dtype} peak {fmt_flops(peak, 'FLOP/s')}, "
                        f"{fmt_bytes(bw)}/s", height=460)
