"""ModelConfig -> Graphviz DOT of the model and one transformer block (drawn by st.graphviz_chart).

The block follows engine/layers/block.py: serial or parallel layout, norms pre, post or sandwich; the attention
box shows MHA/GQA/MQA, QK-norm, RoPE, soft-capping and windows; the FFN box shows dense or gated wiring.
Pure string building, so tests read the DOT directly.
"""
from __future__ import annotations

from app.charts import COLORS
from engine.config import ModelConfig
from engine.layers.ffn import GATE_ACTIVATION

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
    name = "LayerNorm" if cfg.norm == "layernorm" else "RMSNorm"
    return name if cfg.norm_affine else name + "\\n(no gain)"


def attention_label(cfg: ModelConfig) -> str:
    kind = cfg.attention_kind
    heads = f"{cfg.n_heads} q heads" + ("" if kind == "MHA" else f", {cfg.kv_heads} kv heads")
    lines = [f"Attention ({kind})", f"{heads} x {cfg.head_width}"]
    if cfg.qk_norm:
        lines.append("QK-norm on q and k")
    if cfg.position == "rope":
        scaled = "" if cfg.rope_scaling == "none" else f", {cfg.rope_scaling} x{cfg.rope_factor:g}"
        lines.append("RoPE on q, k" + ("" if cfg.rope_fraction == 1 else f" ({cfg.rope_fraction:g} of dims)") + scaled)
    if cfg.position == "alibi":
        lines.append("ALiBi: -m_h (i - j) on scores")
    if cfg.attn_softcap is not None:
        lines.append(f"scores soft-capped at {cfg.attn_softcap:g}")
    if cfg.attn_window is not None:
        lines.append(f"window {cfg.attn_window:,}" + (f", full every {cfg.global_every}" if cfg.global_every else ""))
    return "\\n".join(lines)


def _attention(d: _Dot, p: str, cfg: ModelConfig) -> tuple[str, str]:
    """The attention sub-graph; returns (entry, exit) node ids."""
    with d.cluster(f"{p}attn", attention_label(cfg)):
        c = COLORS["attention"]
        q = d.node(f"{p}q", f"q_proj\\n{cfg.d_model:,}→{cfg.attn_width:,}", c)
        k = d.node(f"{p}k", f"k_proj\\n{cfg.d_model:,}→{cfg.kv_width:,}", c)
        v = d.node(f"{p}v", f"v_proj\\n{cfg.d_model:,}→{cfg.kv_width:,}", c)
        if cfg.qk_norm:
            d.edge(q, d.node(f"{p}qn", "q_norm", NORM_COLOR))
            d.edge(k, d.node(f"{p}kn", "k_norm", NORM_COLOR))
            q, k = f"{p}qn", f"{p}kn"
        if cfg.position == "rope":
            d.node(f"{p}rope", "RoPE")
            d.edge(q, f"{p}rope")
            d.edge(k, f"{p}rope")
            q = k = f"{p}rope"
        s = d.node(f"{p}scores", "q·kᵀ / √head_dim")
        d.edge(q, s)
        if k != q:
            d.edge(k, s)
        if cfg.attn_softcap is not None:
            d.edge(s, d.node(f"{p}cap", f"{cfg.attn_softcap:g}·tanh(s/{cfg.attn_softcap:g})"))
            s = f"{p}cap"
        mask = "causal mask" if cfg.attn_window is None else "causal + window mask"
        d.chain(s, d.node(f"{p}mask", mask), d.node(f"{p}softmax", "softmax"), d.node(f"{p}pv", "× v"))
        d.edge(v, f"{p}pv")
        d.chain(f"{p}pv", d.node(f"{p}o", f"o_proj\\n{cfg.attn_width:,}→{cfg.d_model:,}", c))
    d.node(f"{p}attn_in", "", DATA_COLOR, shape="point")
    for n in (f"{p}q", f"{p}k", f"{p}v"):
        d.edge(f"{p}attn_in", n)
    return f"{p}attn_in", f"{p}o"


def _ffn(d: _Dot, p: str, cfg: ModelConfig) -> tuple[str, str]:
    c, f = COLORS["ffn"], cfg.ffn_width
    kind = f"gated FFN ({cfg.ffn})" if cfg.gated else f"dense FFN ({cfg.ffn})"
    with d.cluster(f"{p}ffn", f"{kind}, d_ff {f:,}"):
        up = d.node(f"{p}up", f"up\\n{cfg.d_model:,}→{f:,}", c)
        down = d.node(f"{p}down", f"down\\n{f:,}→{cfg.d_model:,}", c)
        if cfg.gated:
            gate = d.node(f"{p}gate", f"gate\\n{cfg.d_model:,}→{f:,}", c)
            d.chain(gate, d.node(f"{p}act", GATE_ACTIVATION[cfg.ffn]), d.node(f"{p}mul", "×", ADD_COLOR, "circle"))
            d.chain(up, f"{p}mul", down)
        else:
            d.chain(up, d.node(f"{p}act", cfg.ffn), down)
    d.node(f"{p}ffn_in", "", DATA_COLOR, shape="point")
    d.edge(f"{p}ffn_in", up)
    if cfg.gated:
        d.edge(f"{p}ffn_in", f"{p}gate")
    return f"{p}ffn_in", down


def _block(d: _Dot, cfg: ModelConfig) -> tuple[str, str]:
    """One block wired as in engine/layers/block.py; returns (input, output) node ids."""
    x = d.node("x_in", "x (residual stream)")
    a_in, a_out = _attention(d, "b_", cfg)
    f_in, f_out = _ffn(d, "b_", cfg)
    norm = norm_label(cfg)
    placement, parallel = cfg.norm_placement, cfg.block == "parallel"
    if placement == "sandwich":
        d.edge(a_out, d.node("p1", "post-attn " + norm, NORM_COLOR))
        d.edge(f_out, d.node("p2", "post-FFN " + norm, NORM_COLOR))
        a_out, f_out = "p1", "p2"
    if parallel:
        total = d.add("sum")
        if placement == "post":
            d.edge(x, a_in)
            d.edge(x, f_in)
        else:
            d.chain(x, d.node("n1", norm, NORM_COLOR), a_in)
            if cfg.parallel_shared_norm:
                d.edge("n1", f_in)
            else:
                d.chain(x, d.node("n2", norm, NORM_COLOR), f_in)
        d.edge(a_out, total)
        d.edge(f_out, total)
        d.edge(x, total, "residual")
        if placement != "post":
            return x, total
        d.edge(total, d.node("n1", norm, NORM_COLOR))
        return x, "n1"
    add1, add2 = d.add("add1"), d.add("add2")
    if placement == "post":
        d.chain(x, a_in)
        d.chain(a_out, add1, d.node("n1", norm, NORM_COLOR), f_in)
        d.chain(f_out, add2, d.node("n2", norm, NORM_COLOR))
        d.edge(x, add1, "residual")
        d.edge("n1", add2, "residual")
        return x, "n2"
    d.chain(x, d.node("n1", norm, NORM_COLOR), a_in)
    d.chain(a_out, add1, d.node("n2", norm, NORM_COLOR), f_in)
    d.chain(f_out, add2)
    d.edge(x, add1, "residual")
    d.edge(add1, add2, "residual")
    return x, add2


def block_dot(cfg: ModelConfig) -> str:
    """The whole model: embeddings, one block (x n_layers) in detail, final norm and output head."""
    d = _Dot()
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
    with d.cluster("block", f"transformer block × {cfg.n_layers} ({cfg.block}, {cfg.norm_placement}-norm)"):
        x, out = _block(d, cfg)
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
    body = "\n".join(d.lines)
    return ("digraph model {\n  rankdir=TB; nodesep=0.25; ranksep=0.3; newrank=true;\n"
            '  graph [fontname="Helvetica", fontsize=12]; node [fontname="Helvetica", fontsize=12]; edge [fontname="Helvetica", fontsize=10, color="#555555"];\n'
            f"{body}\n}}\n")
