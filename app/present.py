"""Present mode for a projector, and the Lecture view in the URL (`?section=rope&present=1`).

`section` and `present` are view params (app.state.VIEW_PARAMS): the config parser skips them and the URL sync
keeps them, so they live in st.query_params itself and a copied link reopens the same section in the same mode.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Iterator

import plotly.graph_objects as go
import streamlit as st

from engine.config import parse_bool

def view_param(name: str) -> str | None:
    return st.query_params.get(name)


def set_view_param(name: str, value: str | None) -> None:
    """Put `value` in the URL (None removes the key); untouched when already so, to send no needless update."""
    if value is None:
        if name in st.query_params:
            del st.query_params[name]
    elif st.query_params.get(name) != value:
        st.query_params[name] = value


def parse_present(raw: object) -> tuple[bool, str | None]:
    """(on, problem): `present` accepts 1/0, true/false, yes/no, on/off."""
    if isinstance(raw, bool) or raw is None:
        return bool(raw), None
    on = parse_bool(str(raw)) if str(raw).strip() else False   # a bare `?present=` means off
    if on is not None:
        return on, None
    return False, f"present: {raw!r} is not 1 or 0 (true/false); present mode stays off"


def is_present() -> bool:
    return parse_present(view_param("present"))[0]


def set_present(on: bool) -> None:
    set_view_param("present", "1" if on else None)


_CSS = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
[data-testid="stSidebarCollapseButton"] {display: none !important;}
[data-testid="stMainBlockContainer"] {max-width: 100%; padding: 4.5rem 3rem 2rem;}
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li {font-size: 1.7rem; line-height: 1.4;}
[data-testid="stMarkdownContainer"] table, [data-testid="stTable"] table {font-size: 1.45rem;}
[data-testid="stDataFrame"] {zoom: 1.45;}
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
        fig.update_annotations(font_size=PRESENT_FONT + 2)   # subplot titles: the panels' names
        if fig.layout.title.subtitle.text:                    # a second title line needs its room above the plot
            fig.update_layout(title_subtitle_font_size=PRESENT_FONT - 4, margin_t=(fig.layout.margin.t or 80) + 60)
    return fig


STAGE = "present_stage"


def open_stage() -> None:
    """In present mode: an empty slot here (under the section title) for the section's first chart."""
    st.session_state[STAGE] = st.container() if is_present() else None


@contextmanager
def stage() -> Iterator[None]:
    """Draw inside the stage slot if it is still empty (present mode), else where the caller is."""
    slot = st.session_state.get(STAGE)
    st.session_state[STAGE] = None   # one chart per stage
    with slot if slot is not None else nullcontext():
        yield
