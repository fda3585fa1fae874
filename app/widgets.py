"""Small Streamlit building blocks shared by every page."""
from __future__ import annotations

import streamlit as st

from app import compute, export
from app.text import md
from engine.config import ModelConfig
from engine.units import fmt_bytes, fmt_count, fmt_flops


@st.cache_data(show_spinner=False, max_entries=256)
def _svg(dot: str) -> str | None:
    return export.dot_to_svg(dot)


def diagram(dot: str, container=st) -> None:
    """A Graphviz diagram laid out here by the local `dot` (cached per DOT text) and shown as a static SVG image.
    st.graphviz_chart lays it out in the browser and animates every change: on a knob change that animation
    was most of the browser's work (profiled: d3-graphviz path tweening, about half of the CPU time until the
    page settled). Without a local Graphviz it is still the fallback."""
    svg = _svg(dot)
    if svg is None:
        container.graphviz_chart(dot, width="stretch")
    else:
        container.image(svg, width="stretch")


def page_header(title: str, cfg: ModelConfig, reference: ModelConfig | None = None) -> None:
    """How every page opens: its title (a config name in it stays plain text), then the metric row of the current
    config (deltas against `reference`)."""
    st.title(md(title))
    metric_row(cfg, reference)


def metric_row(cfg: ModelConfig, reference: ModelConfig | None = None) -> None:
    """The row every page opens with: total and non-embedding parameters, bf16 weights, KV cache at the full
    context (batch 1, bf16) and training FLOPs per token. With `reference`, each metric shows its delta."""
    values = _metrics(cfg)
    ref = _metrics(reference) if reference is not None else None
    cols = st.columns(len(values))
    for col, (label, (raw, text, fmt, how)) in zip(cols, values.items()):
        delta, arrow = None, "auto"
        if ref is not None:
            diff = raw - ref[label][0]
            delta, arrow = (("+" if diff > 0 else "-") + fmt(abs(diff)), "auto") if diff else ("same", "off")
        col.metric(label, text, delta=delta, delta_color="off", delta_arrow=arrow, help=how)


def _metrics(cfg: ModelConfig) -> dict[str, tuple]:
    """label -> (raw value, shown text, formatter, how it was obtained)."""
    pc = compute.params(cfg)
    out = {
        "Total parameters": (pc.total, fmt_count(pc.total), fmt_count,
                             "Exact closed form (engine.budget.params), equal to the built model's parameters()."),
        "Non-embedding": (pc.non_embedding, fmt_count(pc.non_embedding), fmt_count,
                          "Total minus token embedding, learned positions and an untied output head."),
    }
    if pc.active != pc.total:   # a mixture of experts: a token uses k of the E routed experts
        out["Active / token"] = (pc.active, fmt_count(pc.active), fmt_count,
                                 "Parameters one token uses: embedding, head, attention, norms, router, shared "
                                 "experts and k of the E routed experts. Memory holds the total; compute uses these.")
    T = cfg.context_length
    weights = compute.memory(cfg, 1, T, "bf16", policy="bf16").weights_bytes
    kv = compute.kv_cache(cfg, 1, T, "bf16")
    fpt = compute.flops(cfg, 1, T, causal=True).flops_per_token
    out["Weights (bf16)"] = (weights, fmt_bytes(weights), fmt_bytes,
                             "Closed form: total parameters x 2 bytes (engine.budget.memory): every expert is stored.")
    out["KV cache, full context"] = (kv, fmt_bytes(kv), fmt_bytes,
                                     f"Closed form at context_length = {T:,} tokens, batch 1, bf16: 2 x layers x "
                                     "tokens x kv_heads x head_dim x 2 bytes; window layers hold min(tokens, window).")
    out["FLOPs / token"] = (fpt, fmt_flops(fpt), fmt_flops,
                            f"Closed form (engine.budget.flops), from active parameters: training forward + "
                            f"backward per token at "
                            f"sequence {T:,}, counting only the query-key pairs a causal, windowed kernel "
                            "computes (Budgets shows the full-square count FlopCounterMode makes).")
    return out
