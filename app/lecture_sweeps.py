"""The Lecture page's ready-made trade-off sweeps: one click picks a sweep of the current config, drawn here and
one more click away on the Trade-offs page (the same sweep, in its URL)."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from app import export, present
from app.charts import sweep as charts
from app.state import current_config
from app.sweep_view import SweepSpec, spec_to_params
from app.widgets import fitted_columns
from engine.sweep.ready import READY, run_ready

TRADEOFFS = Path(__file__).resolve().parents[1] / "pages" / "tradeoffs.py"


def ready_spec(name: str) -> SweepSpec:
    r = READY[name]
    return SweepSpec(knob=r.knob, values=",".join(r.values) if r.values else "", hold=r.hold or "",
                     hold_target=r.hold_target, x=r.x, y=r.y)


def render() -> None:
    cfg = current_config()
    name = st.segmented_control("Sweep", list(READY), format_func=lambda k: READY[k].title, default="gqa",
                                key="lec_sweep", label_visibility="collapsed") or "gqa"
    r = READY[name]
    sweep = run_ready(cfg, name)
    rows = sweep.rows()
    valid = [row for row in rows if row["valid"]]
    if len(valid) >= 2:
        first, last = valid[0], valid[-1]
        shown = [(f"{charts.ALL_METRICS[m].label}, {r.knob}={charts.point_label(row, sweep.knobs)}",
                  charts.fmt_metric(m, row[m])) for m in r.metrics[:2] for row in (first, last)]
        for col, (label, value) in zip(fitted_columns([[v for _, v in shown]], "lecture_sweep_metrics"), shown):
            col.metric(label, value)
    st.caption(r.caption + (f" ({sweep.hold} solved at each point; {len(rows) - len(valid)} invalid points skipped)"
                            if sweep.hold else ""))
    fig = charts.small_multiples(rows, sweep.knobs, list(r.metrics), cols=len(r.metrics),
                                 title=f"{cfg.name}: {r.title}")
    with present.stage():   # in present mode: right under the section title, visible without scrolling
        export.chart(present.scale(fig), f"lecture_sweep_{name}", f"lecture-sweep-{name}",
                     download=not present.is_present())
    if not present.is_present():
        st.page_link(TRADEOFFS, label="Open this sweep on the Trade-offs page (Pareto chart, measured columns)",
                     icon=":material/ssid_chart:", query_params=spec_to_params(ready_spec(name)))
