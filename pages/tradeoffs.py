"""Trade-offs: one or two knobs across their values, every consequence on one chart, ready for a slide.

The sweep lives in the URL (`/tradeoffs?knob=n_kv_heads&values=1,2,4,8,32`), so a slide can link to it;
`present=1` (or the toggle) shows only the charts, large. Measured columns (latency, val loss) run on demand in a
background thread and their training runs land in the run store, next to the Training page's own.
"""
from dataclasses import asdict

import streamlit as st

from app import export, heavy, present, state, url_view
from app.charts import sweep as charts
from app import sweep_view as view
from app.image_export import PROJECTOR, figure_png, png_unavailable
from app.widgets import page_header
from engine.config import ConfigError
from engine.sweep import HOLD_FIELDS, HOLD_TARGETS, KNOBS, METRICS, default_values, value_label
from engine.sweep.measured import MEASURED, MEASURES, MeasureSettings, SweepJob, estimate_duration
from engine.train.store import RunStore

JOB, SEEN, DONE = "sweep_job", "sweep_url_seen", "sweep_seen_done"
W = {key: f"sw_{key}" for key in view.URL_KEYS}   # widget key of each URL key
NONE = {"knob2": "none (one knob)", "hold": "sizes as given"}

cfg = state.current_config()
url = {k: v for k, v in st.query_params.to_dict().items() if k in view.URL_KEYS}
if st.session_state.get(SEEN) != url:               # a new link (first visit, pasted, from Lecture): load it
    spec, problems = view.spec_from_params(url)
    for p in problems:
        url_view.warn(f"URL: {p} — ignored and removed from the URL; the rest of the link applies.")
    for key, value in asdict(spec).items():
        st.session_state[W[key]] = value
_, bad_present = present.parse_present(present.view_param("present"))
if bad_present:
    st.warning(bad_present)
    present.set_present(False)
present.apply_style()
on_stage = present.is_present()
job = st.session_state.get(JOB)
running = job is not None and job.running

if not on_stage:
    page_header(f"Trade-offs: {cfg.name}", cfg)
    st.caption("Pick a knob (and optionally a second): every point is this config with the knob's value, its "
               "parameters, memory, KV cache and FLOPs computed exactly by the engine. Empty values: every allowed "
               "choice, or a grid that fits the knob.")
controls = st.expander("Sweep settings", expanded=False) if on_stage else st.container()   # on stage: the charts
with controls:
    c = st.columns([2, 3, 2, 3])
    knob = c[0].selectbox("Knob", KNOBS, key=W["knob"], disabled=running)
    try:
        grid = default_values(view.sweep_base(cfg, view.SweepSpec(small=st.session_state[W["small"]])), knob)
    except ConfigError:   # the small size does not fit this config: run_spec below reports it, naming the field
        grid = []
    c[1].text_input("Values (comma-separated)", key=W["values"], disabled=running,
                    placeholder=", ".join("null" if v is None else str(v) for v in grid),
                    help="Empty: the default grid shown greyed. null means the field's default (e.g. full attention).")
    c[2].selectbox("Second knob", ("", *KNOBS), key=W["knob2"], format_func=lambda k: k or NONE["knob2"],
                   disabled=running)
    c[3].text_input("Values of the second knob", key=W["values2"], disabled=running or not st.session_state[W["knob2"]])
    # two rows of four: six boxes in a row cut their labels and values at 1280 px ("Small traini…", "sizes as g")
    c = st.columns([3, 2, 2, 3], vertical_alignment="bottom")
    c[0].selectbox("Hold parameters fixed", ("", *HOLD_FIELDS), key=W["hold"], disabled=running,
                   format_func=lambda k: k or NONE["hold"],
                   help="Solve this field at each point so the count stays the base's. d_ff: exact solve, rounded "
                        "to ffn_multiple_of. d_model: the nearest width with whole heads.")
    c[1].selectbox("Count held", HOLD_TARGETS, key=W["hold_target"], disabled=running or not st.session_state[W["hold"]])
    c[2].number_input("Context (tokens)", 0, 10**7, key=W["context"], disabled=running,
                      help="KV cache, FLOPs per token and training memory at batch 1 x this many tokens; 0: each "
                           "point's own context_length.")
    c[3].toggle("Small training size", key=W["small"], disabled=running,
                help="This architecture at d_model 64, 2 layers, 4 heads: what a CPU measures in seconds.")
    c = st.columns([3, 3, 4])
    c[0].selectbox("Pareto x", view.AXES, key=W["x"], format_func=lambda k: charts.ALL_METRICS[k].label)
    c[1].selectbox("Pareto y", view.AXES, key=W["y"], format_func=lambda k: charts.ALL_METRICS[k].label)
spec = view.SweepSpec(**{key: st.session_state[W[key]] for key in view.URL_KEYS})
wanted = view.spec_to_params(spec)
for key in view.URL_KEYS:
    present.set_view_param(key, wanted.get(key))
st.session_state[SEEN] = wanted

try:
    sweep = view.run_spec(cfg, spec)
except ConfigError as e:
    for p in e.problems:
        st.error(p, icon=":material/error:")
    st.stop()
key = (sweep.base.to_yaml(), tuple(sorted({k: v for k, v in wanted.items() if k not in ("x", "y")}.items())))
done = job is not None and not job.running and job.result is not None
rows = job.result.rows() if done and st.session_state.get("sweep_job_key") == key else sweep.rows()
bad = [r for r in rows if not r["valid"]]
if bad:
    st.warning("Invalid points (no numbers): " + "; ".join(
        f"**{charts.point_label(r, sweep.knobs)}**: {', '.join(r['problems'])}" for r in bad))
held = view.held_text(sweep)
title = f"{sweep.base.name}: {' x '.join(sweep.knobs)}"
measured = [m for m in MEASURED if any(r.get(m) is not None for r in rows)]
dense = all(r["active_params"] == r["total_params"] for r in rows)      # the active panel only says something for MoE
stateless = all(not r["state_bytes"] for r in rows)                     # no recurrent layer at any point
shown = [m for m in (*METRICS, *measured) if m != "latency_iqr_ms" and not (dense and m == "active_params")
         and not (stateless and m == "state_bytes")]
panels = charts.small_multiples(rows, sweep.knobs, shown, cols=4 if on_stage else 3, title=title, note=held)
pareto = charts.pareto_figure(rows, sweep.knobs, spec.x, spec.y, note=held)


def png_button(fig, name: str) -> None:
    why = png_unavailable()
    if why:
        st.caption(f"{why}; the HTML download's camera button saves SVG.")
    else:
        st.download_button(f"PNG {PROJECTOR[0]}×{PROJECTOR[1]}", data=lambda: figure_png(fig), file_name=f"{name}.png",
                           mime="image/png", key=f"{name}_png", on_click="ignore", type="tertiary",
                           icon=":material/image:", help="Projector size, large fonts; rendered offline.")


staged = present.scale(panels)
if on_stage:   # present.scale's one height is for a single plot: give each row of panels its own
    staged.update_layout(height=460 * ((len(staged.layout.annotations) + 3) // 4) + 120)
export.chart(staged, "sweep_panels", "sweep-panels", download=not on_stage)
if not on_stage:
    png_button(panels, "sweep-panels")
export.chart(present.scale(pareto), "sweep_pareto", "sweep-pareto", download=not on_stage)
if not on_stage:
    png_button(pareto, "sweep-pareto")
    st.caption(" · ".join(f"**{m.label}**: {m.how}" for m in charts.ALL_METRICS.values()))
    st.dataframe([{**{k: value_label(k, r[k]) for k in sweep.knobs}, **({sweep.hold: r[sweep.hold]} if sweep.hold else {}),
                   **{charts.ALL_METRICS[m].label: charts.fmt_metric(m, r.get(m)) for m in (*METRICS, *measured)},
                   **({"run": r["run_id"]} if "run_id" in r else {}), "problems": "; ".join(r["problems"])}
                  for r in rows], hide_index=True, key="sweep_table")
st.toggle("Present mode", key="sweep_present", value=on_stage, on_change=lambda: present.set_present(
    st.session_state["sweep_present"]), help="Only the charts, large, for a projector. Same as ?present=1.")

with st.expander("Measured columns: forward latency and the val loss of a short run", expanded=job is not None,
                 icon=":material/timer:"):
    c = st.columns(5)
    picked = {"latency": c[0].checkbox("Forward latency", True, key="sw_latency", disabled=running),
              "loss": c[0].checkbox("Val loss of a short run", False, key="sw_loss", disabled=running)}
    what = [m for m in MEASURES if picked[m]]
    steps = c[1].number_input("Training steps per point", 1, 100_000, 100, key="sw_steps", disabled=running)
    budget = c[2].number_input("Latency time budget (s)", 1, 600, 5, key="sw_budget", disabled=running,
                               help="Every point is timed once per round, all points in every round (load hits "
                                    "them alike); rounds stop once every point is tight or the budget is spent.")
    seq = c[3].number_input("Latency tokens", 1, 1 << 16, 64, key="sw_seq", disabled=running)
    try:
        ms = MeasureSettings(what=tuple(what), seq=int(seq), budget_s=float(budget), steps=int(steps))
    except ConfigError as e:
        ms = None
        st.error("; ".join(e.problems))
    if ms is not None:
        est = estimate_duration(sweep, ms)
        st.caption(f"Expected: **{est.text}** ({est.how}). Each point trains with the same seed, data (first names) "
                   "and tokens; the runs are stored and show on the Training page. A point too big for free memory "
                   "is refused with the numbers.")
    b1, b2, _ = c[4].columns([1, 1, 0.1])
    off = heavy.refusal()
    if off:
        st.caption(off)
    if b1.button("Measure", type="primary", key="sw_start", disabled=running or ms is None or bool(off)):
        ticket = heavy.refusal(steps=ms.steps if "loss" in ms.what else None) or heavy.enter(
            f"measured sweep of {cfg.name}", est.high_s)
        if isinstance(ticket, str):
            st.error(ticket, icon=":material/block:")
        else:
            st.session_state[JOB] = SweepJob(sweep, ms, store=RunStore(), ticket=ticket).start()
            st.session_state["sweep_job_key"] = key
            st.rerun()
    if b2.button("Stop", key="sw_stop", disabled=not running):
        job.stop.set()


@st.fragment(run_every=1.0 if running else None)
def live() -> None:
    job = st.session_state.get(JOB)
    if job is None:
        return
    p = job.progress
    if heavy.show_waiting(job, "measured"):
        return
    if job.running:
        text = f"{p.what}: {p.elapsed_s:,.0f} s so far, about {p.seconds_left:,.0f} s left" if p else "starting…"
        st.progress(p.fraction if p else 0.0, text=text)
        return
    if job.error:
        st.error(f"The measurement failed: {job.error}", icon=":material/error:")
    elif job.result is not None:
        runs = [r["run_id"] for r in job.result.rows() if r.get("run_id") is not None]
        note = f" Training runs {', '.join(map(str, runs))} are in Training → Stored runs." if runs else ""
        (st.warning if job.result.stopped else st.success)(
            ("Stopped; the points measured so far are shown." if job.result.stopped else "Every point measured.")
            + note)
    if st.session_state.get(DONE) is not job:   # once per job: redraw the charts with the measured columns
        st.session_state[DONE] = job
        st.rerun()


live()
