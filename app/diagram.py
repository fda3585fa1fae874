"""ModelConfig -> Graphviz DOT of the model and one transformer block (drawn by st.graphviz_chart).

The block is drawn from engine/layers/block.py's block_layout (the structure the Block module is built from):
serial or parallel layout, norms pre, post or sandwich; the attention box shows MHA/GQA/MQA, QK-norm, RoPE,
soft-capping and windows, or MLA's latent projections and cache with, for sparse attention, its lightning indexer
(app/diagram_mla.py); the FFN box shows dense or
gated wiring.
Pure string building, so tests read the DOT directly.
"""
from __future__ import annotations

from app.charts import COLORS
from app.diagram_hybrid import block_title, drawn_spec, layer_strip, one_branch, recurrent_box
from app.diagram_mla import mla_attention, mla_label
from engine.config import ModelConfig
from engine.layers.block import BlockLayout, block_layout
from engine.layers.kinds import LayerSpec
from engine.layers.layer_map import layer_map
from engine.layers.norm import NORMS

NORM_COLOR, ADD_COLOR, DATA_COLOR = COLORS["norms"], "#FFFFFF", "#EEEEEE"


class _Dot:
    """A tiny DOT writer: nodes with a colour, edges, and clusters."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def node(self, nid: str, label: str, color: str = DATA_COLOR, shape: str = "box") -> str:
        font = "white" if color not in (DATA_COLOR, ADD_COLOR) else "black"
        self.lines.append(f'  {nid} [label="{label}", shape={shape}, style="filled,rounded", '
                          f'fillcolor="{color}", fontcolor="{font}"];')
        return nid

    def add(self, nid: str) -> str:
        return self.node(nid, "+", ADD_COLOR, shape="circle")

    def edge(self, a: str, b: str, label: str = "") -> None:
        self.lines.append(f'  {a} -> {b}' + (f' [label="{label}"]' if label else "") + ";")

    def chain(self, *nodes: str) -> None:
        for a, b in zip(nodes, nodes[1:]):
            self.edge(a, b)

    def cluster(self, name: str, label: str) -> "_Cluster":
        return _Cluster(self, name, label)


class _Cluster:
    def __init__(self, dot: _Dot, name: str, label: str):
        self.dot, self.name, self.label = dot, name, label

    def __enter__(self) -> _Dot:
        self.dot.lines.append(f'  subgraph cluster_{self.name} {{ label="{self.label}"; style="rounded,dashed"; '
                              f'color="#888888";')
        return self.dot

    def __exit__(self, *exc) -> None:
        self.dot.lines.append("  }")


def norm_label(cfg: ModelConfig) -> str:
    lay = block_layout(cfg)
    name = NORMS[lay.norm].label
    return name if lay.norm_affine else name + "\\n(no gain)"


def attention_label(cfg: ModelConfig) -> str:
    lay = block_layout(cfg)
    kind = lay.attention
    heads = f"{cfg.n_heads} q heads" + ("" if kind == "MHA" else f", {cfg.kv_heads} kv heads")
    lines = mla_label(lay.mla, lay.indexer) if lay.mla else [f"Attention ({kind})", f"{heads} x {cfg.head_width}"]
    if lay.qk_norm:
        lines.append("QK-norm on q and k" + (" (no gain, RoPE layers only)" if lay.qk_norm_rope_only else ""))
    if lay.rope_fraction is not None:
        scaled = "" if cfg.rope_scaling == "none" else f", {cfg.rope_scaling} x{cfg.rope_factor:g}"
        part = (f" ({lay.mla.rope_dim:,} rotary dims)" if lay.mla else
                "" if lay.rope_fraction == 1 else f" ({lay.rope_fraction:g} of dims)")
        lines.append("RoPE on q, k" + part + scaled)
    if cfg.position == "alibi":
        lines.append("ALiBi: -m_h (i - j) on scores")
    if lay.attn_softcap is not None:
        lines.append(f"scores soft-capped at {lay.attn_softcap:g}")
    if lay.attn_sinks:
        lines.append("sinks: one learned logit per head joins the softmax")
    if lay.attn_gate:
        lines.append(f"output gate: × sigmoid(x W_g), one per {'dimension' if lay.attn_gate == 'elementwise' else 'head'}")
    if lay.window is not None:
        lines.append(f"window {lay.window:,}" + (f", full every {lay.global_every}" if lay.global_every else ""))
    if lay.chunk is not None:
        lines.append(f"chunked layers: own block of {lay.chunk:,} only")
    if lay.temperature is not None:
        lines.append(lay.temperature)
    return "\\n".join(lines)


def _attention(d: _Dot, p: str, cfg: ModelConfig, lay: BlockLayout) -> tuple[str, str]:
    """The attention sub-graph; returns (entry, exit) node ids."""
    with d.cluster(f"{p}attn", attention_label(cfg)):
        c = COLORS["attention"]
        q = d.node(f"{p}q", f"q_proj\\n{cfg.d_model:,}→{cfg.attn_width:,}", c)
        k = d.node(f"{p}k", f"k_proj\\n{cfg.d_model:,}→{cfg.kv_width:,}", c)
        v = d.node(f"{p}v", f"v_proj\\n{cfg.d_model:,}→{cfg.kv_width:,}", c)
        if lay.qk_norm:
            d.edge(q, d.node(f"{p}qn", "q_norm", NORM_COLOR))
            d.edge(k, d.node(f"{p}kn", "k_norm", NORM_COLOR))
            q, k = f"{p}qn", f"{p}kn"
        if lay.rope_fraction is not None:
            d.node(f"{p}rope", "RoPE")
            d.edge(q, f"{p}rope")
            d.edge(k, f"{p}rope")
            q = k = f"{p}rope"
        s = d.node(f"{p}scores", "q·kᵀ / √head_dim")
        d.edge(q, s)
        if k != q:
            d.edge(k, s)
        if lay.attn_softcap is not None:
            d.edge(s, d.node(f"{p}cap", f"{lay.attn_softcap:g}·tanh(s/{lay.attn_softcap:g})"))
            s = f"{p}cap"
        mask = "causal mask" + (" + window" if lay.window is not None else "") + (" + chunk" if lay.chunk else "")
        softmax = "softmax with the sink\\n(its share dropped)" if lay.attn_sinks else "softmax"
        d.chain(s, d.node(f"{p}mask", mask), d.node(f"{p}softmax", softmax), d.node(f"{p}pv", "× v"))
        d.edge(v, f"{p}pv")
        d.chain(f"{p}pv", d.node(f"{p}o", f"o_proj\\n{cfg.attn_width:,}→{cfg.d_model:,}", c))
    d.node(f"{p}attn_in", "", DATA_COLOR, shape="point")
    for n in (f"{p}q", f"{p}k", f"{p}v"):
        d.edge(f"{p}attn_in", n)
    return f"{p}attn_in", f"{p}o"


def _ffn(d: _Dot, p: str, cfg: ModelConfig, lay: BlockLayout) -> tuple[str, str]:
    c, f = COLORS["ffn"], cfg.ffn_width
    kind = f"gated FFN ({lay.ffn})" if lay.gated else f"dense FFN ({lay.ffn})"
    with d.cluster(f"{p}ffn", f"{kind}, d_ff {f:,}"):
        up = d.node(f"{p}up", f"up\\n{cfg.d_model:,}→{f:,}", c)
        down = d.node(f"{p}down", f"down\\n{f:,}→{cfg.d_model:,}", c)
        if lay.gated:
            gate = d.node(f"{p}gate", f"gate\\n{cfg.d_model:,}→{f:,}", c)
            d.chain(gate, d.node(f"{p}act", lay.activation), d.node(f"{p}mul", "×", ADD_COLOR, "circle"))
            d.chain(up, f"{p}mul", down)
        else:
            d.chain(up, d.node(f"{p}act", lay.activation), down)
    d.node(f"{p}ffn_in", "", DATA_COLOR, shape="point")
    d.edge(f"{p}ffn_in", up)
    if lay.gated:
        d.edge(f"{p}ffn_in", f"{p}gate")
    return f"{p}ffn_in", down


def _moe(d: _Dot, p: str, cfg: ModelConfig, lay: BlockLayout) -> tuple[str, str]:
    """The router choosing k of E experts, their weighted sum, and the shared experts beside them."""
    c, f, E, k = COLORS["ffn"], cfg.expert_width, lay.experts, lay.experts_per_token
    kind = f"gated experts ({lay.ffn})" if lay.gated else f"dense experts ({lay.ffn})"
    with d.cluster(f"{p}ffn", f"mixture of experts: {kind}, d_ff {f:,} each"):
        router = d.node(f"{p}router", f"router ({cfg.router})\n{cfg.d_model:,}→{E:,} scores, keep top {k}", c)
        chosen = d.node(f"{p}experts", f"{k} of {E:,} routed experts\n(each {cfg.d_model:,}→{f:,}→{cfg.d_model:,})",
                        c, shape="box3d")
        out = d.node(f"{p}wsum", "Σ weight × expert", ADD_COLOR)   # a box: a circle grows around its text
        d.chain(router, chosen, out)
        if lay.shared_experts:
            gate = " × sigmoid gate" if cfg.shared_expert_gate else ""
            shared = d.node(f"{p}shared", f"{lay.shared_experts} shared expert(s){gate}\nd_ff {cfg.shared_width:,}, "
                                          "every token", c)
            d.edge(shared, out)
    d.node(f"{p}ffn_in", "", DATA_COLOR, shape="point")
    d.edge(f"{p}ffn_in", router)
    d.edge(f"{p}ffn_in", chosen)
    if lay.shared_experts:
        d.edge(f"{p}ffn_in", f"{p}shared")
    return f"{p}ffn_in", out


def _mixers(d: _Dot, cfg: ModelConfig, lay: BlockLayout, spec: LayerSpec) -> tuple[str, str]:
    """The layer's mixer(s): attention (or MLA), a recurrent mixer, or both side by side, their outputs added."""
    boxes = []
    for kind in spec.mixers:
        if kind != "attention":
            boxes.append(recurrent_box(d, "b_", cfg, kind))
        elif lay.mla:
            boxes.append(mla_attention(d, "b_", cfg, lay.mla, attention_label(cfg), NORM_COLOR, lay.indexer))
        else:
            boxes.append(_attention(d, "b_", cfg, lay))
    if len(boxes) == 1:
        return boxes[0]
    entry, total = d.node("b_mix_in", "", DATA_COLOR, shape="point"), d.add("b_mix_sum")
    for b_in, b_out in boxes:
        d.edge(entry, b_in)
        d.edge(b_out, total)
    return entry, total


def _block(d: _Dot, cfg: ModelConfig, spec: LayerSpec) -> tuple[str, str]:
    """One block wired as its layout says; returns (input, output) node ids."""
    lay = block_layout(cfg, spec)
    x = d.node("x_in", "x (residual stream)")
    norm = norm_label(cfg)
    if spec.mixers:
        a_in, a_out = _mixers(d, cfg, lay, spec)
    if spec.ffn != "none":
        f_in, f_out = (_moe if spec.ffn == "moe" else _ffn)(d, "b_", cfg, lay)
    if not spec.mixers or spec.ffn == "none":
        b_in, b_out = (a_in, a_out) if spec.mixers else (f_in, f_out)
        return one_branch(d, x, lay, b_in, b_out, norm, NORM_COLOR)
    if lay.branch_norms:
        d.edge(a_out, d.node("p1", "post-attn " + norm, NORM_COLOR))
        d.edge(f_out, d.node("p2", "post-FFN " + norm, NORM_COLOR))
        a_out, f_out = "p1", "p2"
    if lay.parallel:
        total = d.add("sum")
        if lay.input_norms == 0:
            d.edge(x, a_in)
            d.edge(x, f_in)
        else:
            d.chain(x, d.node("n1", norm, NORM_COLOR), a_in)
            if lay.input_norms == 1:
                d.edge("n1", f_in)
            else:
                d.chain(x, d.node("n2", norm, NORM_COLOR), f_in)
        d.edge(a_out, total)
        d.edge(f_out, total)
        d.edge(x, total, "residual")
        if not lay.residual_norms:
            return x, total
        d.edge(total, d.node("n1", norm, NORM_COLOR))
        return x, "n1"
    add1, add2 = d.add("add1"), d.add("add2")
    if lay.residual_norms:
        d.chain(x, a_in)
        d.chain(a_out, add1, d.node("n1", norm, NORM_COLOR), f_in)
        d.chain(f_out, add2, d.node("n2", norm, NORM_COLOR))
        d.edge(x, add1, "residual")
        d.edge("n1", add2, "residual")
        return x, "n2"
    if lay.input_norms == 0:   # post_branch: the branches read the residual stream itself
        d.chain(x, a_in)
        d.chain(a_out, add1, f_in)
    else:
        d.chain(x, d.node("n1", norm, NORM_COLOR), a_in)
        d.chain(a_out, add1, d.node("n2", norm, NORM_COLOR), f_in)
    d.chain(f_out, add2)
    d.edge(x, add1, "residual")
    d.edge(add1, add2, "residual")
    return x, add2


def block_dot(cfg: ModelConfig, whole: bool = True) -> str:
    """The whole model: embeddings, one block (x n_layers) in detail, final norm and output head; with
    `whole=False` the block alone (the Lecture's serial / parallel pair)."""
    d = _Dot()
    if not whole:
        with d.cluster("block", f"transformer block ({cfg.block}, {cfg.norm_placement}-norm)"):
            _block(d, cfg, drawn_spec(cfg))
        return _digraph(d)
    emb = "token embedding" + (" × √d_model" if cfg.embed_scale else "")
    chain = [d.node("tokens", "token ids"), d.node("emb", f"{emb}\\n{cfg.vocab_size:,} × {cfg.d_model:,}",
                                                    COLORS["embeddings"])]
    if cfg.position in ("learned", "sinusoidal"):
        pos = d.node("pos", f"{cfg.position} positions", COLORS["positions"])
        chain.append(d.add("pos_add"))
        d.edge(pos, "pos_add")
    if cfg.embed_norm:
        chain.append(d.node("emb_norm", "embedding " + norm_label(cfg), NORM_COLOR))
    d.chain(*chain)
    n_moe = sum(cfg.moe_layers)
    mixed = f"; MoE in {n_moe} of {cfg.n_layers} layers, the others a dense FFN of d_ff {cfg.ffn_width:,}" if (
        0 < n_moe < cfg.n_layers) else ""
    spec = drawn_spec(cfg)
    title = (block_title(cfg, spec) if cfg.hybrid else
             f"transformer block × {cfg.n_layers} ({cfg.block}, {cfg.norm_placement}-norm{mixed})")
    strip = layer_strip(layer_map(cfg))
    with d.cluster("block", title):
        if strip:
            d.lines.append(f"  layer_map [shape=plaintext, label={strip}];")
        x, out = _block(d, cfg, spec)
        if strip:
            d.lines.append("  layer_map -> x_in [style=invis];")
    d.edge(chain[-1], x)
    tail = [out]
    if cfg.final_norm:
        tail.append(d.node("final_norm", "final " + norm_label(cfg), NORM_COLOR))
    head = "output head" + (" (tied to embedding)" if cfg.tie_embeddings else "")
    tail.append(d.node("head", f"{head}\\n{cfg.d_model:,} × {cfg.vocab_size:,}", COLORS["output_head"]))
    if cfg.logit_softcap is not None:
        tail.append(d.node("logit_cap", f"{cfg.logit_softcap:g}·tanh(z/{cfg.logit_softcap:g})"))
    tail.append(d.node("logits", "logits"))
    d.chain(*tail)
    return _digraph(d)


def _digraph(d: _Dot) -> str:
    body = "\n".join(d.lines)
    return ("digraph model {\n  rankdir=TB; nodesep=0.25; ranksep=0.3; newrank=true;\n"
            '  graph [fontname="Helvetica", fontsize=12]; node [fontname="Helvetica", fontsize=12]; edge [fontname="Helvetica", fontsize=10, color="#555555"];\n'
            f"{body}\n}}\n")
