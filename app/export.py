"""Offline exports: any Plotly figure as one standalone HTML file, and a handout of a config (Markdown or one
HTML file) with its parameter table, budgets and block diagram.

Everything is self-contained: plotly.js is inlined (no CDN), the diagram is inline SVG rendered by the local
Graphviz `dot` (or its DOT source when Graphviz is not installed), so the files open on a machine without network.
"""
from __future__ import annotations

import html
import re
import shutil
import subprocess
from typing import Any, Callable

import plotly.graph_objects as go
import streamlit as st
from markdown_it import MarkdownIt

from app.charts import LABELS
from app.diagram import block_dot
from app.shared import drawn
from app.tables import config_value
from app.text import md, plain_figure
from engine.budget.flops import flops_budget
from engine.budget.memory import memory_budget
from engine.budget.params import count_params
from engine.config import FIELDS, GROUPS, ModelConfig
from engine.units import fmt_bytes, fmt_count, fmt_flops

_EXTERNAL = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I)


def external_references(page: str) -> list[str]:
    """Tags that would fetch something from the network when the page opens (scripts, styles, images)."""
    return [m.group(0) for m in _EXTERNAL.finditer(page)]


def figure_html(fig: go.Figure) -> str:
    """The figure as a standalone page: plotly.js inlined, MathJax off, so it renders offline."""
    plain_figure(fig)
    return fig.to_html(include_plotlyjs=True, include_mathjax=False, full_html=True,
                       config={"displaylogo": False, "toImageButtonOptions": {"format": "svg"}})


CHART_DOWNLOAD = "Chart as offline HTML"


def chart(fig: go.Figure, key: str, name: str | None = None, download: bool = True) -> None:
    """st.plotly_chart plus a small link-style button that downloads the same figure as one offline HTML file
    (built only on click). The Design, Budgets, Activations, Compare and Lecture pages draw every chart with it."""
    st.plotly_chart(plain_figure(fig), key=f"{key}_chart")
    if download:
        _download_button(fig, key, name)


def _download_button(fig: go.Figure, key: str, name: str | None) -> None:
    st.download_button(CHART_DOWNLOAD, data=lambda: figure_html(fig), file_name=f"{name or key}.html",
                       mime="text/html", key=f"{key}_download", on_click="ignore", type="tertiary",
                       icon=":material/download:", help="Interactive, plotly.js inlined: opens without network.")


@drawn(max_entries=1024)
def _drawn_chart(build: Callable[..., go.Figure], args: tuple, key: str) -> go.Figure:
    fig = plain_figure(build(*args))
    st.plotly_chart(fig, key=f"{key}_chart")
    return fig


def shared_chart(build: Callable[..., go.Figure], *args: Any, key: str, name: str | None = None,
                 download: bool = True) -> None:
    """`chart` for a figure that is a function of its arguments (configs and plain values): built and turned
    into its message once per server (app.shared.drawn), replayed for every other session and rerun; the
    download button stays per session (a widget), its file built only on click."""
    fig = _drawn_chart(build, args, key)
    if download:
        _download_button(fig, key, name)


def dot_to_svg(dot: str) -> str | None:
    """Render DOT with the local Graphviz into an inline <svg> element; None when `dot` is missing or fails."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, "-Tsvg"], input=dot, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    start = done.stdout.find("<svg")
    return done.stdout[start:] if done.returncode == 0 and start >= 0 else None


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown pipe table (the handouts and the Lecture page); a `|` inside a cell is escaped so it cannot
    split the row."""
    line = lambda cells: "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "---|" * len(header)] + [line(row) for row in rows])


def _sections(cfg: ModelConfig, batch: int, seq: int, dtype: str, policy: str, optimizer: str) -> list[tuple[str, str]]:
    """(title, Markdown body) of each handout section; the diagram section's body is its DOT source."""
    pc = count_params(cfg)
    mem = memory_budget(cfg, batch, seq, dtype=dtype, policy=policy, optimizer=optimizer)
    fl = flops_budget(cfg, batch, seq, causal=True)
    config_rows = [[f"`{name}`", md(cfg.name) if name == "name" else config_value(getattr(cfg, name)),
                    spec.help.replace("*", "\\*")]
                   for group in GROUPS for name, spec in FIELDS.items() if spec.group == group]
    param_rows = [[LABELS[name], fmt_count(n), f"{n / pc.total:.2%}"] for name, n in pc.components.items() if n]
    param_rows += [["**total**", f"**{fmt_count(pc.total)}**", "100.00%"],
                   ["non-embedding", fmt_count(pc.non_embedding), f"{pc.non_embedding / pc.total:.2%}"]]
    tying = "saves" if pc.tied else "would save"
    formula = lambda key: f"`{mem.formulas[key]}`" if mem.formulas.get(key) else ""  # noqa: E731  (code: keeps * literal)
    mem_rows = [[label, fmt_bytes(getattr(mem, key)), formula(key)] for key, label in (
        ("weights_bytes", "weights"), ("grads_bytes", "gradients"), ("optimizer_bytes", "optimizer state"),
        ("master_bytes", "fp32 master copy"), ("activations_bytes", "activations (saved for backward)"),
        ("train_total_bytes", "**training total**"), ("kv_cache_bytes", "KV cache"),
        ("infer_total_bytes", "**inference total**"))]
    flop_rows = [["forward", fmt_flops(fl.forward_flops)], ["backward", fmt_flops(fl.backward_flops)],
                 ["per token (forward + backward; causal/window query-key pairs)", fmt_flops(fl.flops_per_token)],
                 ["6N per token (rule of thumb)", fmt_flops(fl.six_n_per_token)]]
    setting = f"batch {batch}, sequence {seq:,}, {dtype} activations, {policy} weights, {optimizer}"
    return [
        ("Configuration", "Every architecture field of the config (YAML at the end reproduces it exactly).\n\n"
         + markdown_table(["field", "value", "meaning"], config_rows)),
        ("Parameters", f"Exact closed form (engine.budget.params), equal to the built model's `parameters()`. "
         f"Tying the embedding and output head {tying} {fmt_count(pc.tying_saves)} parameters.\n\n"
         + markdown_table(["component", "parameters", "share"], param_rows)),
        ("Memory", f"Closed form (engine.budget.memory) for {setting}.\n\n"
         + markdown_table(["term", "bytes", "formula"], mem_rows)),
        ("Compute", f"Closed form (engine.budget.flops) for one training step at batch {batch}, sequence {seq:,}.\n\n"
         + markdown_table(["FLOPs", "value"], flop_rows)),
        ("Diagram", block_dot(cfg)),
        ("Config YAML", "```yaml\n" + cfg.to_yaml() + "```"),
    ]


def _title(cfg: ModelConfig) -> str:
    return f"{md(cfg.name)}: architecture handout"


_INTRO = "Generated offline by Transformer Architecture Explorer; every number is computed by the engine."


def handout_markdown(cfg: ModelConfig, batch: int = 1, seq: int | None = None, dtype: str = "bf16",
                     policy: str = "mixed-bf16", optimizer: str = "adamw") -> str:
    """The config's handout as Markdown; the diagram is a ```dot block (render with Graphviz)."""
    parts = [f"# {_title(cfg)}", _INTRO]
    for title, body in _sections(cfg, batch, seq or cfg.context_length, dtype, policy, optimizer):
        parts += [f"## {title}", f"```dot\n{body}```" if title == "Diagram" else body]
    return "\n\n".join(parts) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;
vertical-align:top}td:nth-child(2){white-space:nowrap}th{background:#f3f3f3}code,pre{background:#f6f6f6}pre{padding:8px;overflow-x:auto}
svg{max-width:100%;height:auto}"""


def handout_html(cfg: ModelConfig, batch: int = 1, seq: int | None = None, dtype: str = "bf16",
                 policy: str = "mixed-bf16", optimizer: str = "adamw") -> str:
    """The same handout as one offline HTML file; the diagram is inline SVG when Graphviz is installed."""
    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    body = [renderer.render(f"# {_title(cfg)}"), f"<p>{_INTRO}</p>"]
    for title, text in _sections(cfg, batch, seq or cfg.context_length, dtype, policy, optimizer):
        body.append(f"<h2>{html.escape(title)}</h2>")
        if title == "Diagram":
            svg = dot_to_svg(text)
            body.append(svg if svg is not None else f"<p>Graphviz is not installed here; the DOT source:</p>"
                                                    f"<pre><code>{html.escape(text)}</code></pre>")
        else:
            body.append(renderer.render(text))
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(cfg.name)}: architecture handout"
            f"</title><style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
