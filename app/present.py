"""Present mode for a projector, and the view state in the URL (`?section=rope&present=1`).

The URL's config params belong to app.state; `section` and `present` are view params. `capture_view_params()`
runs in streamlit_app.py before navigation and moves them from the URL into the session, so the config parser
never sees them; the Lecture page writes them back (`write_view_params`) after app.state has synced the config,
so a copied link reopens the same section in the same mode.
"""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

VIEW_KEYS = ("section", "present")
_WRITTEN = "view_written"        # what the app itself last put in the URL
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def view_key(name: str) -> str:
    return f"view_{name}"


def capture_view_params() -> None:
    """Take `section` / `present` out of the URL. A value the app did not write itself (a deep link, a hand-edited
    URL) replaces the session's; the app's own echo of its state is just dropped."""
    written = st.session_state.setdefault(_WRITTEN, {})
    for name in VIEW_KEYS:
        if name in st.query_params:
            value = st.query_params[name]
            if written.get(name) != value:
                st.session_state[view_key(name)] = value
            del st.query_params[name]


def parse_present(raw: object) -> tuple[bool, str | None]:
    """(on, problem): `present` accepts 1/0, true/false, yes/no, on/off."""
    if isinstance(raw, bool) or raw is None:
        return bool(raw), None
    text = str(raw).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE, None
    return False, f"present: {raw!r} is not 1 or 0 (true/false); present mode stays off"


def is_present() -> bool:
    return parse_present(st.session_state.get(view_key("present")))[0]


def write_view_params(section: str) -> None:
    """Put the section (and present=1 when on) back into the URL, and remember that the app wrote them."""
    want = {"section": section}
    if is_present():
        want["present"] = "1"
    for name in VIEW_KEYS:
        if name in want:
            st.query_params[name] = want[name]
        elif name in st.query_params:
            del st.query_params[name]
    st.session_state[_WRITTEN] = want


_CSS = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
[data-testid="stSidebarCollapseButton"] {display: none !important;}
[data-testid="stMainBlockContainer"] {max-width: 100%; padding: 4.5rem 3rem 2rem;}
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li {font-size: 1.7rem; line-height: 1.4;}
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] p {font-size: 1.45rem;}
[data-testid="stMetricValue"], [data-testid="stMetricValue"] p {font-size: 3rem;}
[data-testid="stMetricLabel"] p {font-size: 1.35rem;}
[data-testid="stMain"] input, [data-testid="stMain"] [data-baseweb="select"] div {font-size: 1.4rem !important;}
h1, h2 {font-size: 2.8rem !important;}
h3 {font-size: 2.1rem !important;}
</style>"""


def apply_style() -> None:
    """In present mode: hide the sidebar (editor and navigation), enlarge text and metrics."""
    if is_present():
        st.html(_CSS)


PRESENT_FONT, PRESENT_HEIGHT = 22, 640


def scale(fig: go.Figure) -> go.Figure:
    """Charts for the back row: larger fonts and a taller plot in present mode (unchanged otherwise)."""
    if is_present():   # explicit sizes: Streamlit's chart theme would otherwise keep its own tick and legend fonts
        fig.update_layout(font=dict(size=PRESENT_FONT), height=PRESENT_HEIGHT, title_font=dict(size=PRESENT_FONT + 6),
                          legend_font=dict(size=PRESENT_FONT))
        axis = dict(tickfont=dict(size=PRESENT_FONT), title_font=dict(size=PRESENT_FONT))
        fig.update_xaxes(**axis)
        fig.update_yaxes(**axis)
    return fig
