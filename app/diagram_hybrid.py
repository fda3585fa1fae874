"""The block diagram of a hybrid model (engine/layers/mixers.py): which layer is drawn, the box of a recurrent
mixer (its lines come from the kind's own `summary`), and a layer with one branch (a mixer-only or FFN-only
layer). One layer is drawn in detail and the block's title
counts the kinds; above it, a strip of every layer (engine/layers/layer_map.py) when the layers differ."""
from __future__ import annotations

from app.charts import COLORS, FFN_KIND_COLORS, MIXER_COLORS, kind_color
from engine.config import ModelConfig
from engine.layers.block import BlockLayout, plain_spec
from engine.layers.kinds import LayerSpec
from engine.layers.layer_map import LayerMap
from engine.layers.mixers import MIXERS, layer_groups, layer_kinds, spec_label


def drawn_spec(cfg: ModelConfig) -> LayerSpec:
    """The layer drawn in detail: for a one-kind model its block (MoE when the model has experts, as before);
    for a hybrid the first attention layer with an FFN, else the first layer with both branches, else layer 1."""
    if not cfg.hybrid:
        return plain_spec(cfg, moe=cfg.n_experts is not None)
    specs = [spec for spec, _ in layer_groups(cfg)]
    both = [s for s in specs if s.mixers and s.ffn != "none"]
    return next((s for s in both if s.attention), both[0] if both else specs[0])


def block_title(cfg: ModelConfig, spec: LayerSpec) -> str:
    """The block cluster's title for a hybrid: the drawn kind, then every kind with its count."""
    kinds = layer_kinds(cfg)
    counts = ", ".join(f"{n} × {label}" for label, n in kinds)
    return (f"block × {cfg.n_layers} of {len(kinds)} kind{'s' if len(kinds) > 1 else ''}: {counts}; drawn: a "
            f"{spec_label(spec)} layer ({cfg.block}, {cfg.norm_placement}-norm)")


def recurrent_box(d, p: str, cfg: ModelConfig, kind: str) -> tuple[str, str]:
    """A recurrent mixer as one box of its summary lines; returns (entry, exit) node ids."""
    node = d.node(f"{p}{kind}", "\\n".join(MIXERS[kind].summary(cfg)), COLORS["attention"])
    return node, node


def one_branch(d, x: str, lay: BlockLayout, b_in: str, b_out: str, norm: str, norm_color: str) -> tuple[str, str]:
    """A serial layer with only a mixer or only an FFN: x + Y(N(x)) pre, N(x + Y(x)) post, x + P(Y(N(x)))
    sandwich, x + P(Y(x)) post_branch; returns (input, output) node ids."""
    add = d.add("add1")
    if lay.residual_norms:
        d.chain(x, b_in)
        d.chain(b_out, add, d.node("n1", norm, norm_color))
        d.edge(x, add, "residual")
        return x, "n1"
    if lay.input_norms:
        d.chain(x, d.node("n1", norm, norm_color), b_in)
    else:
        d.chain(x, b_in)
    if lay.branch_norms:
        d.edge(b_out, d.node("p1", "post-branch " + norm, norm_color))
        b_out = "p1"
    d.chain(b_out, add)
    d.edge(x, add, "residual")
    return x, add


STRIP_MAX_LAYERS = 512


def layer_strip(m: LayerMap) -> str:
    """The layer map as one Graphviz HTML-label node body: a mixer row and an FFN row of one cell per layer (a
    tooltip names the layer), and a legend of every kind with its count. Empty when every layer is alike."""
    if m.kinds == 1:
        return ""
    width = max(2, min(8, 320 // m.n_layers))
    drawn = m.n_layers <= STRIP_MAX_LAYERS   # past that a cell per layer is wider than any page: the legend only

    def row(attr: str, colors: dict[str, str]) -> str:
        return "<TR>" + "".join(
            f'<TD BGCOLOR="{kind_color(getattr(c, attr), colors)}" WIDTH="{width}" HEIGHT="12" FIXEDSIZE="TRUE" '
            f'TOOLTIP="layer {c.index}: {c.label}"></TD>' for c in m.cells) + "</TR>"

    def legend(kinds, colors) -> str:
        return ", ".join(f'<FONT COLOR="{kind_color(k.key, colors)}">■</FONT> {k.label} × {len(k.layers)}'
                         for k in kinds)

    span = f'COLSPAN="{m.n_layers if drawn else 1}"'
    return ('<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="0">'
            f'<TR><TD {span}><FONT POINT-SIZE="11">layers 1–{m.n_layers}: '
            + ("mixer (top), FFN (bottom)" if drawn else f"more than {STRIP_MAX_LAYERS} to draw one by one")
            + '</FONT></TD></TR>'
            + (row("mixer", MIXER_COLORS) + row("ffn", FFN_KIND_COLORS) if drawn else "")
            + f'<TR><TD {span}><FONT POINT-SIZE="10">{legend(m.mixers, MIXER_COLORS)}</FONT></TD></TR>'
            f'<TR><TD {span}><FONT POINT-SIZE="10">{legend(m.ffns, FFN_KIND_COLORS)}</FONT></TD></TR></TABLE>>')
