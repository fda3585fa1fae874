"""Figures of the Lecture page: engine.lecture results -> Plotly figures, one per worked example.

Colours follow app.charts.COLORS where a component is shown; every axis names its unit.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.charts import ACTIVATION_COLORS, COLORS, COMPONENT_GROUP, MIXER_COLORS
from app.charts import layout as _base_layout
from engine.config import DENSE_FFNS
from engine.lecture.attention import MaskOrder
from engine.lecture.blocks import NormComparison, SerialParallel
from engine.lecture.ffn import GatingMatch
from engine.lecture.latent import LatentCache
from engine.lecture.moe import StoreVsCompute
from engine.lecture.sizes import DepthWidth, KVVariant, MicroTable
from engine.lecture.state import FixedState
from engine.lecture.tying import AbsentTokenGrad
from engine.units import byte_unit, fmt_bytes, fmt_count, fmt_flops

PAIR = ("#4C78A8", "#F58518")   # two things side by side: serial/parallel, before/after, first/second


def _layout(fig: go.Figure, title: str, x: str, y: str, **kw) -> go.Figure:
    """app.charts' layout with both axis titles (every lecture chart has them) and the legend under the plot."""
    return _base_layout(fig, title, xaxis_title=x, yaxis_title=y, legend=dict(orientation="h", y=-0.2), **kw)


def marked_activations_figure(curves: dict[str, list[float]], marks: tuple[float, ...] = ()) -> go.Figure:
    """The engine's activations over z, with vertical guides at the inputs being discussed."""
    fig = go.Figure()
    for name in DENSE_FFNS:
        fig.add_scatter(x=curves["z"], y=curves[name], name=name, line=dict(color=ACTIVATION_COLORS.get(name), width=3,
                        dash="dot" if name == "gelu_tanh" else "solid"))
    for z in marks:
        fig.add_vline(x=z, line=dict(color="#888888", dash="dash"), annotation_text=f"z = {z:g}")
    return _layout(fig, "Activations: GELU dips below zero, ReLU does not", "input z (unitless)", "output (unitless)")


def gating_figure(g: GatingMatch) -> go.Figure:
    """FFN matrix parameters: dense, gated at the matched width, gated at the dense width."""
    labels = [f"dense, d_ff {g.dense_width:,}", f"gated, d_ff {g.gated_width:,}", f"gated, d_ff {g.dense_width:,}"]
    values = [g.dense_params, g.gated_params, g.same_width_gated_params]
    fig = go.Figure(go.Bar(x=labels, y=values, marker_color=[COLORS["ffn"], COLORS["ffn"], "#A0A0A0"],
                           text=[fmt_count(v) for v in values], textposition="outside"))
    return _layout(fig, f"FFN matrix parameters at d_model {g.d_model:,}", "FFN variant", "parameters")


def serial_parallel_figure(r: SerialParallel) -> go.Figure:
    """The block output per coordinate, serial next to parallel."""
    idx = [f"y[{i}]" for i in range(len(r.x))]
    fig = go.Figure([go.Bar(x=idx, y=r.serial.output, name="serial", marker_color=PAIR[0]),
                     go.Bar(x=idx, y=r.parallel.output, name="parallel (shared norm)", marker_color=PAIR[1])])
    return _layout(fig, "Same branches, different block outputs", "output coordinate", "value (unitless)",
                   barmode="group")


ROLE_COLORS = {"input": COLORS["embeddings"], "target": COLORS["output_head"], "input+target": "#9D755D",
               "absent": COLORS["ffn"]}


def token_role(r: AbsentTokenGrad, j: int) -> str:
    if j in r.tokens and j == r.target:
        return "input+target"
    return "input" if j in r.tokens else "target" if j == r.target else "absent"


def absent_gradient_figure(r: AbsentTokenGrad) -> go.Figure:
    """Gradient size on every output-head row, coloured by the token's role in this one prediction."""
    norms = [sum(v * v for v in row) ** 0.5 for row in r.head_grad]
    roles = [token_role(r, j) for j in range(len(norms))]
    fig = go.Figure(go.Bar(x=[f"token {j}" for j in range(len(norms))], y=norms,
                           marker_color=[ROLE_COLORS[role] for role in roles], text=roles, textposition="outside",
                           customdata=r.probs, hovertemplate="%{x}: |grad| %{y:.4f}, p %{customdata:.4f}<extra></extra>"))
    return _layout(fig, "Every output row gets a gradient, absent tokens included", "vocabulary row",
                   "gradient norm (loss units per weight)")


def norm_figure(r: NormComparison) -> go.Figure:
    idx = [f"x[{i}]" for i in range(len(r.x))]
    fig = go.Figure([go.Bar(x=idx, y=r.rmsnorm, name="RMSNorm", marker_color=PAIR[0]),
                     go.Bar(x=idx, y=r.layernorm, name="LayerNorm", marker_color=PAIR[1])])
    return _layout(fig, "RMSNorm rescales; LayerNorm also centers", "coordinate", "normalized value (unitless)",
                   barmode="group")


def rope_grid_figure(grid: list[list[float]], theta_deg: float) -> go.Figure:
    """Scores for every (query position, key position): equal along each diagonal."""
    n = len(grid)
    fig = go.Figure(go.Heatmap(z=grid, x=list(range(n)), y=list(range(n)), colorscale="RdBu", zmid=0,
                               texttemplate="%{z:.2f}", colorbar=dict(title="score")))
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, f"RoPE score q·k at θ = {theta_deg:g}° per position", "key position j",
                   "query position i")


def softcap_figure(curve: dict[str, list[float]], cap: float) -> go.Figure:
    fig = go.Figure([go.Scatter(x=curve["z"], y=curve["z"], name="no cap", line=dict(color="#A0A0A0", dash="dot")),
                     go.Scatter(x=curve["z"], y=curve["capped"], name=f"{cap:g}·tanh(z/{cap:g})",
                                line=dict(color=COLORS["output_head"], width=3)),
                     go.Scatter(x=curve["z"], y=curve["slope"], name="slope (right axis)", yaxis="y2",
                                line=dict(color=COLORS["attention"], dash="dash"))])
    ymax = 1.3 * cap
    return _layout(fig, f"Soft-capping bounds logits to (−{cap:g}, {cap:g})", "logit z (nats)", "capped logit (nats)",
                   yaxis=dict(range=[-ymax, ymax]),
                   yaxis2=dict(title="slope d cap / dz", overlaying="y", side="right", range=[0, 1.05],
                               tickmode="linear", tick0=0, dtick=0.25, showgrid=False))


def mask_order_figure(r: MaskOrder) -> go.Figure:
    """Both orders' probabilities, each bar labelled with its value; the weight a masked key leaks (0.0007 of a
    0.7 axis is under a pixel) is called out over its bar, so the room sees what the numbers say."""
    keys = [f"key {i}" + (" (masked)" if m else "") for i, m in enumerate(r.masked)]
    fig = go.Figure([go.Bar(x=keys, y=probs, name=name, marker_color=color, text=[f"{p:.4f}" for p in probs],
                            textposition="outside", cliponaxis=False)
                     for probs, name, color in ((r.cap_then_mask, "cap, then mask", PAIR[0]),
                                                (r.mask_then_cap, "mask, then cap", PAIR[1]))])
    for i, (masked, leak) in enumerate(zip(r.masked, r.mask_then_cap)):
        if masked and leak > 0:   # x: the category's centre + 0.2, where the second of two grouped bars stands
            fig.add_annotation(x=i + 0.2, y=leak, ax=0, ay=-80, standoff=24, showarrow=True, arrowhead=2,
                               arrowcolor=PAIR[1], text=f"leaks {leak:.4f}", font=dict(color=PAIR[1], size=16))
    fig.update_yaxes(range=[0, 1.2 * max(max(r.cap_then_mask), max(r.mask_then_cap))])
    return _layout(fig, "A masked key must get probability 0", "key", "attention probability", barmode="group")


def kv_by_kind_figure(variants: list[KVVariant]) -> go.Figure:
    div, unit = byte_unit(max(v.bytes for v in variants))
    fig = go.Figure(go.Bar(x=[v.kind for v in variants], y=[v.bytes / div for v in variants],
                           marker_color=COLORS["attention"], text=[fmt_bytes(v.bytes) for v in variants],
                           textposition="outside"))
    return _layout(fig, "KV cache with the same query heads", "attention kind", f"KV cache ({unit})")


def depth_figure(r: DepthWidth) -> go.Figure:
    """Second shape relative to the first: equal block parameters, unequal cache and depth."""
    a, b = r.shapes
    labels = ["block parameters", "KV cache", "sequential blocks"]
    fig = go.Figure(go.Bar(x=labels, y=[r.block_ratio, r.kv_ratio, r.depth_ratio], marker_color=PAIR[1],
                           text=[f"{v:g}×" for v in (r.block_ratio, r.kv_ratio, r.depth_ratio)],
                           textposition="outside"))
    fig.add_hline(y=1, line=dict(color="#888888", dash="dash"))
    return _layout(fig, f"L={b.n_layers}, D={b.d_model} relative to L={a.n_layers}, D={a.d_model}", "quantity",
                   "ratio (×)")


_MICRO_GROUP = {"wte": "token_embedding", "wpe": "positions", "lm_head": "output_head"}


def microgpt_figure(t: MicroTable) -> go.Figure:
    colors = [COLORS[COMPONENT_GROUP[_MICRO_GROUP.get(r.name, "ffn" if "mlp" in r.name else "attention_q")]]
              for r in t.rows]
    fig = go.Figure(go.Bar(x=[r.name for r in t.rows], y=[r.count for r in t.rows], marker_color=colors,
                           text=[fmt_count(r.count) for r in t.rows], textposition="outside"))
    return _layout(fig, f"microgpt by hand: {t.hand_total:,} parameters", "matrix", "parameters")


def store_vs_compute_figure(r: StoreVsCompute) -> go.Figure:
    """Parameters stored vs parameters one token uses, and bf16 bytes vs forward FLOPs per token."""
    fig = go.Figure(go.Bar(x=["stored (memory)", "used per token (compute)"], y=[r.total / 1e9, r.active / 1e9],
                           marker_color=[COLORS["ffn"], COLORS["attention"]],
                           text=[f"{r.total:,}", f"{r.active:,}"], textposition="outside", cliponaxis=False,
                           hovertemplate="%{x}: %{text} parameters<extra></extra>"))
    return _layout(fig, f"{r.name}: you store every expert, you compute {r.per_token} of {r.experts}", "",
                   "parameters (billions)", height=380)


def latent_cache_figure(r: LatentCache) -> go.Figure:
    """KV cache against context length for each attention kind, batch 1; MLA's latent cache bold. Dashed: the
    plain kinds and the expanded per-head keys and values MLA's latent stands for."""
    div, unit = byte_unit(max(max(v) for v in r.series.values()))
    fig = go.Figure()
    for k in r.kinds:
        values = r.series[k.kind]
        latent = k.kind == "MLA latent"
        fig.add_trace(go.Scatter(
            x=r.tokens, y=[v / div for v in values], mode="lines", name=f"{k.kind}: {fmt_bytes(k.per_token)}/token",
            line=dict(width=5 if latent else 2, dash="solid" if k.config.mla else "dash",
                      color=COLORS["attention"] if latent else None),
            customdata=[fmt_bytes(v) for v in values], hovertemplate=f"{k.kind}: %{{customdata}}<extra></extra>"))
    fig.update_xaxes(tickformat=",")
    return _layout(fig, f"KV cache vs context: {r.n_layers} layers, {r.n_heads} query heads, {r.dtype}, batch 1",
                   "context length (tokens)", f"KV cache ({unit})", hovermode="x unified")


STATE_COLORS = (MIXER_COLORS["full"], MIXER_COLORS["gdn"], MIXER_COLORS["mamba2"], COLORS["ffn"])   # .., hybrid


def fixed_state_figure(r: FixedState) -> go.Figure:
    """Left: bytes one sequence holds (KV cache + recurrent state) against context; right: forward FLOPs of one
    decoded token. Both axes logarithmic; dotted lines at the marked contexts (4K, 128K, 1M)."""
    div, unit = byte_unit(max(max(k.bytes) for k in r.kinds))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("what one sequence holds", "what one decoded token computes"))
    for k, color in zip(r.kinds, STATE_COLORS):
        for col, values, text in ((1, k.bytes, [fmt_bytes(v) for v in k.bytes]),
                                  (2, k.flops, [fmt_flops(v) for v in k.flops])):
            fig.add_trace(go.Scatter(x=r.tokens, y=[v / div for v in values] if col == 1 else list(values),
                                     mode="lines", name=k.kind, legendgroup=k.kind, showlegend=col == 1,
                                     line=dict(color=color, width=4 if k.kind.startswith("hybrid") else 2.5),
                                     customdata=text, hovertemplate=f"{k.kind}: %{{customdata}}"
                                                                    "<extra>%{x:,} tokens</extra>"), row=1, col=col)
    for t in r.marks:
        for col in (1, 2):
            fig.add_vline(x=t, line=dict(color="#999999", dash="dot", width=1), row=1, col=col)
    fig.update_xaxes(type="log", dtick=1, tickformat="~s", title_text="context (tokens, log)")
    fig.update_yaxes(type="log", dtick=1, tickformat="~g", title_text=f"bytes per sequence ({unit}, log)", row=1, col=1)
    fig.update_yaxes(type="log", dtick=1, tickformat="~s", title_text="FLOPs per decoded token (FLOP, log)", row=1,
                     col=2)
    marks = ", ".join(f"{t:,}" for t in r.marks)
    return _base_layout(fig, f"{r.name}, {r.dtype}, batch 1: dotted at {marks} tokens", height=440,
                        legend=dict(orientation="h", y=-0.22))
