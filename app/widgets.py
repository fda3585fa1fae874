"""Small Streamlit building blocks shared by every page."""
from __future__ import annotations

import base64
import html
import re
from typing import TYPE_CHECKING, Any, Callable

import streamlit as st

from app import compute, export, present, state
from app.diagram import block_dot
from app.shared import drawn
from app.tables import config_value
from app.text import md
from engine.config import ModelConfig
from engine.limits import MAX_CONFIG_BYTES
from engine.units import fmt_bytes, fmt_count, fmt_flops

if TYPE_CHECKING:
    import pandas as pd


@st.cache_data(show_spinner=False, max_entries=256)
def _svg(dot: str) -> str | None:
    return export.dot_to_svg(dot)


def diagram_width(dot: str) -> int | None:
    """The diagram's natural width in CSS pixels (Graphviz writes points, 3/4 of a pixel); None without Graphviz."""
    svg = _svg(dot)
    found = re.match(r'<svg width="([\d.]+)pt"', svg or "")
    return round(float(found.group(1)) * 4 / 3) if found else None


def diagram(dot: str, container=st, natural: bool = False) -> None:
    """A Graphviz diagram laid out here by the local `dot` (cached per DOT text) and shown as a static SVG image,
    stretched to its column or at its `natural` size (its 12-point text then 16 px).
    st.graphviz_chart lays it out in the browser and animates every change: on a knob change that animation
    was most of the browser's work (profiled: d3-graphviz path tweening, about half of the CPU time until the
    page settled). Without a local Graphviz it is still the fallback."""
    svg = _svg(dot)
    if svg is None:
        container.graphviz_chart(dot, width="stretch")
    else:
        container.image(svg, width=diagram_width(dot) if natural else "stretch")


def diagram_row(dots: dict[str, str]) -> None:
    """Diagrams side by side at one scale (titled by their keys): each takes a share of the row proportional to its
    natural width, up to that width, so their text is the same size (two columns stretched a narrow diagram to
    twice the scale of a wide one). Without Graphviz, one column each."""
    widths = {title: diagram_width(dot) for title, dot in dots.items()}
    if None in widths.values():
        for col, (title, dot) in zip(st.columns(len(dots)), dots.items()):
            col.markdown(f"**{md(title)}**")
            diagram(dot, col)
        return
    cells = "".join(
        f'<figure style="flex: {w} 1 0; max-width: {w}px; margin: 0"><figcaption style="font-weight: 600; '
        f'font-size: {"1.7rem" if present.is_present() else "1rem"}">'
        f'{html.escape(title)}</figcaption><img style="width: 100%" alt="{html.escape(title)}" '
        f'src="data:image/svg+xml;base64,{base64.b64encode(_svg(dots[title]).encode()).decode()}"></figure>'
        for title, w in widths.items())
    st.html(f'<div style="display: flex; gap: 2rem; align-items: flex-start">{cells}</div>')


def yaml_uploader(label: str, key: str, **kwargs) -> None:
    """A YAML file uploader that states the limit the app applies (engine.limits.MAX_CONFIG_BYTES): Streamlit's
    own line reads "1MB per file", its smallest setting, while a larger file is refused with a message."""
    box = st.container(key=f"{key}_box")
    limit = f"{MAX_CONFIG_BYTES // 1024} KiB per file • YAML, YML"
    box.html(f"<style>.st-key-{key}_box [data-testid='stFileUploaderDropzoneInstructions'] span {{font-size: 0}} "
             f".st-key-{key}_box [data-testid='stFileUploaderDropzoneInstructions'] span::after "
             f"{{content: '{limit}'; font-size: 0.875rem}}</style>")
    box.file_uploader(label, type=["yaml", "yml"], key=key, max_upload_size=1, **kwargs)


@drawn(max_entries=512)
def config_diagram(cfg: ModelConfig, natural: bool = False) -> None:
    """The config's block diagram (app.diagram.block_dot), drawn once per config on this server."""
    diagram(block_dot(cfg), natural=natural)


@drawn(max_entries=1024)
def shared_dataframe(build: Callable[..., "pd.DataFrame"], *args: Any) -> None:
    """st.dataframe of `build(*args)` (a table builder of app.tables), built and serialized once per server;
    every row shown (a fixed ten-row height hid the norms, output head and total of the larger models)."""
    st.dataframe(build(*args), hide_index=True, width="stretch", height="content")


def page_header(title: str, cfg: ModelConfig, reference: ModelConfig | None = None) -> None:
    """How every page opens: its title (a config name in it stays plain text), then the metric row of the current
    config (deltas against `reference`). The session's config edited away from its preset says so: "(edited)"
    after a name that is still the preset's, and a caption naming the preset and what changed. Drawn once per
    (title, config, reference, caption) on this server and replayed; the metrics' font style is drawn here
    (Streamlit sends a style-only st.html to a container of its own, which a cached replay cannot address)."""
    changes = edits(cfg)
    still_named = cfg.name == state.preset_config(state.current_preset()).name
    shown = ", ".join(changes[:MAX_EDITS_SHOWN]) + (f" and {len(changes) - MAX_EDITS_SHOWN} more"
                                                    if len(changes) > MAX_EDITS_SHOWN else "")
    caption = f"Edited from the {state.current_preset()} preset: {shown}." if changes else ""
    st.html(_header(title + (" (edited)" if changes and still_named else ""), cfg, reference, caption))


MAX_EDITS_SHOWN = 6


def edits(cfg: ModelConfig) -> list[str]:
    """`field old → new` for each field (but the name) where `cfg`, when it is the session's config, differs from
    the preset it was loaded from; [] for any other config."""
    if cfg != state.current_config():
        return []
    base = state.preset_config(state.current_preset()).to_dict()
    return [f"{k} {config_value(base[k])} → {config_value(v)}" for k, v in cfg.to_dict().items()
            if k != "name" and v != base[k]]


@drawn(max_entries=1024)
def _header(title: str, cfg: ModelConfig, reference: ModelConfig | None, caption: str = "") -> str:
    st.title(md(title))
    if caption:
        st.caption(md(caption))
    return metric_row(cfg, reference, style=False)


def metric_row(cfg: ModelConfig, reference: ModelConfig | None = None, style: bool = True) -> str:
    """The rows every page opens with: the parameter counts (total, non-embedding, active for a mixture of
    experts), then the budgets (bf16 weights, KV cache at the full context for batch 1 in bf16, training FLOPs
    per token). Two rows of three, so an exact count in the hundreds of billions shows whole at full size on a
    1280-pixel screen with the sidebar open. With `reference`, each metric shows its delta. Returns the style
    that fits the values' font (drawn too unless `style` is False)."""
    values = _metrics(cfg)
    ref = _metrics(reference) if reference is not None else None
    counts = [label for label in values if label in COUNT_METRICS]
    rows = [counts, [label for label in values if label not in COUNT_METRICS]]
    texts = [[values[label][1] for label in row] for row in rows]
    cols = fitted_columns(texts, key="page_header_metrics", style=style)
    for col, label in zip(cols, rows[0] + rows[1]):
        raw, text, fmt, how = values[label]
        delta, arrow = None, "auto"
        if ref is not None:
            diff = raw - ref[label][0]
            delta, arrow = (("+" if diff > 0 else "-") + fmt(abs(diff)), "auto") if diff else ("same", "off")
        col.metric(label, text, delta=delta, delta_color="off", delta_arrow=arrow, help=how)
    return fitted_style(texts, "page_header_metrics")


COUNT_METRICS = ("Total parameters", "Non-embedding", "Active / token")
# Widths of Streamlit's metric font (Source Sans) in em, measured in Chromium and rounded up by class: digits 0.497,
# separators 0.249, I i j l up to 0.263, parentheses 0.303, capitals up to 0.664 (M 0.727, W 0.786), small letters
# up to 0.555 (m 0.829, w 0.719), % 0.824. So a text's estimate is never below what the browser draws.
_NARROW, _WIDE = set(",.:·' ()|!ijlI"), set("MWmw%")


def text_em(text: str) -> float:
    """Upper bound of `text`'s width in em of the metric font."""
    return sum(0.31 if c in _NARROW else 0.85 if c in _WIDE else 0.68 if c.isupper() or not c.isascii() else
               0.56 if c.isalpha() else 0.5 for c in text) or 1.0


def fitted_style(rows: list[list[str]], key: str) -> str:
    """The style that sets the font of the metrics in container `key` to at most its normal size and at most what
    lets the longest of `rows`' texts fit its column (CSS container units: 1cqi is 1% of the metric's width)."""
    fit = 96 / max(text_em(t) for row in rows for t in row)   # 4% to spare for rounding and kerning
    return (f"<style>.st-key-{key} [data-testid='stMetric'] {{container-type: inline-size;}} "
            f".st-key-{key} [data-testid='stMetricValue'] p {{font-size: min(1em, {fit:.2f}cqi);}}</style>")


def fitted_columns(rows: list[list[str]], key: str, style: bool = True) -> list:
    """Columns for metrics whose values (`rows` of their texts) must show whole, never cut with an ellipsis:
    rows of equal columns (as many as the longest row), each value's font fitted (fitted_style; drawn here
    unless `style` is False). Returns the columns in reading order, one per text."""
    per_row = max(len(row) for row in rows)
    box = st.container(key=key)
    if style:
        box.html(fitted_style(rows, key))
    cols = []
    for row in rows:
        cols += box.columns(per_row)[:len(row)]
    return cols


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
    held = ("layers x tokens x (kv_lora_rank + qk_rope_head_dim) x 2 bytes: MLA caches the latent and the shared "
            "rotary key" if cfg.mla else "2 x layers x tokens x kv_heads x head_dim x 2 bytes; window layers hold "
            "min(tokens, window)")
    out["KV cache, full context"] = (kv, fmt_bytes(kv), fmt_bytes,
                                     f"Closed form at context_length = {T:,} tokens, batch 1, bf16: {held}.")
    out["FLOPs / token"] = (fpt, fmt_flops(fpt), fmt_flops,
                            f"Closed form (engine.budget.flops), from active parameters: training forward + "
                            f"backward per token at "
                            f"sequence {T:,}, counting only the query-key pairs a causal, windowed kernel "
                            "computes (Budgets shows the full-square count FlopCounterMode makes).")
    return out
