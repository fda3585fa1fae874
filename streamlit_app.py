"""Transformer Architecture Explorer: `streamlit run streamlit_app.py` (or `make run`).

The entry point owns the page config, the shared sidebar (preset picker, config editor, YAML) and the
navigation; each page under pages/ reads `app.state.current_config()` and draws.
"""
from pathlib import Path

import streamlit as st

from app import editor, state

ROOT = Path(__file__).parent
PAGES = [  # (file, title, icon)
    ("pages/design.py", "Design", ":material/architecture:"),
    ("pages/budgets.py", "Budgets", ":material/memory:"),
    ("pages/activations.py", "Activations", ":material/show_chart:"),
    ("pages/latency.py", "Latency", ":material/speed:"),
    ("pages/training.py", "Training", ":material/model_training:"),
    ("pages/compare.py", "Compare", ":material/compare_arrows:"),
    ("pages/tradeoffs.py", "Trade-offs", ":material/ssid_chart:"),
    ("pages/lecture.py", "Lecture", ":material/school:"),
]

st.set_page_config(page_title="Transformer Architecture Explorer", page_icon=":material/hub:", layout="wide")
pages = [st.Page(ROOT / path, title=title, icon=icon, default=path == "pages/design.py")
         for path, title, icon in PAGES]
page = st.navigation(pages)
with st.sidebar:
    editor.sidebar()
state.sync_url()
for problem in st.session_state.get(state.PROBLEMS, []):
    st.warning(f"{problem} — ignored; showing the rest of the link's config.")
if st.session_state.get(editor.EDIT_PROBLEMS):
    st.warning("Some values in the sidebar are invalid (see the messages there); the pages show the last valid "
               f"config, **{state.current_config().name}**.", icon=":material/error:")
page.run()
