"""UI helpers for the Streamlit app. No engine logic lives here: every number comes from an `engine` function.

  state.py, editor.py     the current config in session state and the URL; the editor generated from its fields
  present.py              present mode and the view params of the URL
  widgets.py              page_header and metric_row: how every page opens
  compute.py              engine results cached per config (st.cache_data)
  shared.py               server-wide caches: the config's canonical key, drawing functions replayed across sessions
  heavy.py, policy.py     the server's one queue for heavy jobs and the teacher's limits on them
  serve.py                `make serve`: the app as a class server
  charts/                 Plotly figure builders, one module per page family, and the shared palette
  diagram.py, tables.py   the block as Graphviz DOT; dataframes for st.dataframe
  export.py               chart downloads and the offline handout
  image_export.py         PNG at projector size (kaleido with the local Chromium, offline)
  budget_view.py, budget_measure.py, compare_view.py, training_view.py, latency_plan.py, latency_view.py,
  sweep_view.py
                          each page's decisions as plain functions, so pages only read state, call and draw
  lecture_sections.py     the Lecture page's sections, one render function per worked example
  lecture_kit.py          their shared inputs, metric row and stage chart
  lecture_sweeps.py       its ready-made trade-off sweeps, one click each
"""
