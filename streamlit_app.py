"""Transformer Architecture Explorer: `streamlit run streamlit_app.py` (or `make run`).

The entry point owns the page config, the shared sidebar (preset picker, config editor, YAML) and the
navigation; each page under pages/ reads `app.state.current_config()` and draws.
"""
from pathlib import Path

import streamlit as st

from app import editor, state, url_view
from app.shared import freeze_startup_objects
from app.text import md

ROOT = Path(__file__).parent
freeze_startup_objects()   # after new imports only: the first run, a page's first visit (app/shared.py says why)
PAGES = [  # (file, title, icon)
    ("pages/design.py", "Design", ":material/architecture:"),
    ("pages/budgets.py", "Budgets", ":material/memory:"),
    ("pages/activations.py", "Activations", ":material/show_chart:"),
    ("pages/latency.py", "Latency", ":material/speed:"),
    ("pages/training.py", "Training", ":material/model_training:"),
    ("pages/compare.py", "Compare", ":material/compare_arrows:"),
    ("pages/tradeoffs.py", "Trade-offs", ":material/ssid_chart:"),
    ("pages/deploy.py", "Deploy", ":material/dns:"),
    ("pages/lecture.py", "Lecture", ":material/school:"),
]

# The favicon inline (a hub: one node joined to three), served as a data: URL. Streamlit fetches ":material/..."
# page icons from a font CDN, and the app makes no request outside the machine.
ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="#4b5fd6" stroke="#4b5fd6" '
        'stroke-width="2"><path d="M12 12 5 5M12 12h8M12 12l-6 7"/><circle cx="12" cy="12" r="3.5"/>'
        '<circle cx="5" cy="5" r="2.5"/><circle cx="20" cy="12" r="2.5"/><circle cx="6" cy="19" r="2.5"/></svg>')
st.set_page_config(page_title="Transformer Architecture Explorer", page_icon=ICON, layout="wide")
pages = [st.Page(ROOT / path, title=title, icon=icon, default=path == "pages/design.py")
         for path, title, icon in PAGES]
page = st.navigation(pages)
with st.sidebar:
    editor.sidebar()
state.sync_url()
for problem in st.session_state.get(state.PROBLEMS, []):
    st.warning(f"{md(problem)} — ignored and removed from the URL; showing the rest of the link's config.",
               icon=":material/link_off:")
url_view.notice_area()
if st.session_state.get(editor.EDIT_PROBLEMS):
    st.warning("Some values in the sidebar are invalid (see the messages there); the pages show the last valid "
               f"config, **{md(state.current_config().name)}**.", icon=":material/error:")
page.run()
