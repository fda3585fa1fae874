"""Lecture: the teaching material's worked examples, one section at a time, computed live by the engine.

The section is in the URL (`/lecture?section=rope`), so a slide deck can link straight to it; `present=1` (or the
toggle) hides the sidebar and enlarges everything for a projector. PageDown / PageUp step through the sections,
as a presentation clicker does.
"""
import streamlit as st

from app import export, present, state, widgets
from app.lecture_sections import SECTIONS
from app.text import md

IDS = list(SECTIONS)
PICK, TOGGLE, LAST = "lecture_pick", "lecture_present", "lecture_last_section"


def _at() -> int:
    """Index of the URL's section; without one (the sidebar's page links drop the query string) the section this
    session last showed; the first one when unknown."""
    raw = present.view_param("section") or st.session_state.get(LAST)
    return IDS.index(raw) if raw in SECTIONS else 0


def _go(step: int) -> None:
    present.set_view_param("section", IDS[min(max(_at() + step, 0), len(IDS) - 1)])


def _picked() -> None:
    present.set_view_param("section", st.session_state[PICK])


def _toggled() -> None:
    present.set_present(st.session_state[TOGGLE])


cfg = state.current_config()   # first: on a fresh server's deep link this reruns through the entry point
raw = present.view_param("section")
if raw is not None and raw not in SECTIONS:
    st.warning(f"section: {md(repr(raw))} is not one of {', '.join(IDS)}; showing the first section.")
index = _at()
section = IDS[index]
present.set_view_param("section", section)   # the URL always names the section shown
st.session_state[LAST] = section
_, problem = present.parse_present(present.view_param("present"))
if problem:
    st.warning(md(problem))
    present.set_present(False)
present.apply_style()
on_stage = present.is_present()
if not on_stage:
    widgets.page_header("Lecture: worked examples", cfg)

st.session_state[PICK], st.session_state[TOGGLE] = section, on_stage
prev_col, pick_col, next_col, toggle_col = st.columns([2, 3.4, 2, 1.8], vertical_alignment="bottom")
prev_col.button("Previous", key="lecture_prev", on_click=_go, args=(-1,), disabled=index == 0, shortcut="PageUp",
                icon=":material/arrow_back:", width="stretch")
pick_col.selectbox("Section", IDS, key=PICK, on_change=_picked, label_visibility="collapsed",
                   format_func=lambda s: f"{IDS.index(s) + 1}. {SECTIONS[s][0]}")
next_col.button("Next", key="lecture_next", on_click=_go, args=(1,), disabled=index == len(IDS) - 1,
                shortcut="PageDown", icon=":material/arrow_forward:", width="stretch")
toggle_col.toggle("Present mode", key=TOGGLE, on_change=_toggled,
                  help="Hide the sidebar, enlarge text and charts for a projector. Same as ?present=1 in the URL.")

title, render = SECTIONS[section]
st.header(f"{index + 1}. {title}", anchor=section)
present.open_stage()
try:
    render()
except ValueError as e:   # bad input (ConfigError included): say which field and what is allowed
    st.error(md(str(e)))

if not on_stage:
    with st.expander("Handout of the current config (offline HTML or Markdown)", icon=":material/description:"):
        st.caption(f"**{md(cfg.name)}**: parameter table, memory and FLOP budgets at batch 1 and the full context, the "
                   "block diagram and the YAML. One file, no network needed to open it.")
        c1, c2 = st.columns(2)
        c1.download_button("Handout (HTML)", data=lambda: export.handout_html(cfg), file_name=f"{cfg.name}-handout.html",
                           mime="text/html", key="lecture_handout_html", on_click="ignore", icon=":material/download:")
        c2.download_button("Handout (Markdown)", data=lambda: export.handout_markdown(cfg),
                           file_name=f"{cfg.name}-handout.md", mime="text/markdown", key="lecture_handout_md",
                           on_click="ignore", icon=":material/download:")
