"""Figures of the Design page: where the parameters live, the layer map, and how RoPE scaling changes the rotation
frequencies."""
from __future__ import annotations

import plotly.graph_objects as go

from app.charts import COLORS, COMPONENT_GROUP, FFN_KIND_COLORS, LABELS, MIXER_COLORS, kind_color, layout
from engine.budget.params import ParamCount
from engine.config import ModelConfig
from engine.layers.layer_map import LayerMap, layer_map


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


HOVER_RANGES_CHARS = 200   # a kind's layer list in the hover, up to this long


def layer_map_figure(m: LayerMap) -> go.Figure:
    """One strip of the layers: the top row coloured by mixer kind, the bottom row by FFN kind; one legend entry
    per kind with its layer count, each cell's hover the exact layer (1-based) and its kind in words, and the
    kind's layers where that list is short enough to read (a 100,000-layer alternation is not)."""
    fig = go.Figure()
    for row, title, kinds, colors in ((1, "mixer", m.mixers, MIXER_COLORS), (0, "FFN", m.ffns, FFN_KIND_COLORS)):
        for k in kinds:
            n, ranges = len(k.layers), k.ranges                 # once per kind: every cell shares it
            where = f"<br>{title} {k.label} in layers {ranges}" if len(ranges) <= HOVER_RANGES_CHARS else ""
            fig.add_trace(go.Bar(
                x=list(k.layers), y=[0.9] * n, base=[row] * n, width=0.9, name=f"{title}: {k.label} ({n:,} layers)",
                marker_color=kind_color(k.key, colors), marker_line_width=0, legendgroup=title,
                customdata=[m.cells[i - 1].label for i in k.layers],
                hovertemplate=f"layer %{{x}} of {m.n_layers:,}: %{{customdata}}{where}<extra></extra>"))
    fig.update_xaxes(title_text=f"layer (1 to {m.n_layers:,}, input side first)", range=[0.5, m.n_layers + 0.5],
                     tickmode="auto", showgrid=False, zeroline=False)
    fig.update_yaxes(tickvals=[0.45, 1.45], ticktext=["FFN", "mixer"], range=[-0.05, 1.95], showgrid=False,
                     zeroline=False, fixedrange=True)
    fig.update_layout(barmode="overlay", bargap=0, legend=dict(orientation="h", yanchor="top", y=-0.45, x=0))
    return layout(fig, f"Layer map: {m.n_layers:,} layers, {m.kinds:,} kind{'s' if m.kinds > 1 else ''}",
                  height=260 + 22 * ((len(m.mixers) + len(m.ffns) + 1) // 2))


def layer_map_chart(cfg: ModelConfig) -> go.Figure:
    """layer_map_figure of the config (a function of the config alone, so a server draws it once)."""
    return layer_map_figure(layer_map(cfg))
