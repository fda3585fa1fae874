"""User strings (config names, uploaded file names, sampled text, messages quoting input) shown as plain text.

Streamlit renders titles, captions and alert bodies as Markdown (links, images, :color[...] directives, $math$,
bare URLs turned into links), and Plotly renders trace names, titles and tick labels as a subset of HTML (<a href>).
A crafted name must not become a link, an image or a request, so every user string passes through here first.
"""
from __future__ import annotations

import re
from typing import Any

import plotly.graph_objects as go

_CODE = re.compile(r"(`[^`\n]+`)")   # `name` spans: shown as code, their text as typed
_MD_SPECIAL = re.compile(r"[\\`*~$#|<>\[\]!]"                    # always active (GFM, math, HTML, images)
                         r"|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"     # emphasis; n_kv_heads stays as it is
                         r"|:(?=\S)")                              # :emoji: shortcodes and :red[...] directives
# GFM links bare URLs and e-mail addresses after parsing, so an escape does not stop it: a zero-width space
# (invisible) breaks the pattern instead.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)", re.I)


def md(text: Any) -> str:
    """`text` as literal Markdown, line breaks as spaces. Backslash-escaped: brackets (links, images,
    :color[...] directives), `:` before a word (:emoji: shortcodes), < > (HTML, autolinks), `$` (math), `#`, `|`,
    backticks and emphasis marks (so head_dim*rope_fraction keeps its `*`); a zero-width space inside `://`,
    `www.` and before `@` keeps GFM from linking bare URLs and e-mail addresses. Field names such
    as d_model keep their text (an underscore inside a word is not emphasis); a `code span` stays one."""
    flat = _AUTOLINK.sub("\u200b", " ".join(str(text).split()))
    parts = _CODE.split(flat)   # odd items are code spans, where an escape would show as a backslash
    return "".join(p if i % 2 else _MD_SPECIAL.sub(lambda m: "\\" + m.group(), p) for i, p in enumerate(parts))


_NOT_OURS = re.compile(r"<(?!/?(?:br|b|i|sup|sub|extra)>)", re.I)   # the only tags our own labels use


def plotly_text(text: Any) -> str:
    """`text` for a Plotly label: any `<` that does not open one of our formatting tags (<br>, <b>, <extra>,
    ...) is escaped, so no <a href> or other tag from a user string forms."""
    return _NOT_OURS.sub("&lt;", str(text))


def plain_figure(fig: go.Figure) -> go.Figure:
    """Escape, in place, every label a user string can reach: trace names, hover templates, categorical x/y/
    labels/text, the title and the axis titles."""
    for trace in fig.data:
        for attr in ("name", "hovertemplate"):
            if attr in trace and isinstance(trace[attr], str):
                trace[attr] = plotly_text(trace[attr])
        for attr in ("x", "y", "labels", "text"):
            values = trace[attr] if attr in trace else None
            if values is not None and not isinstance(values, str) and len(values) \
                    and all(isinstance(v, str) for v in values):
                trace[attr] = [plotly_text(v) for v in values]
    if isinstance(fig.layout.title.text, str):
        fig.layout.title.text = plotly_text(fig.layout.title.text)
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        if isinstance(axis.title.text, str):
            axis.title.text = plotly_text(axis.title.text)
    return fig
