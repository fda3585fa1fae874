"""Training: short runs on offline data in a background thread, live curves, A/B comparisons, stored runs."""
import streamlit as st

from app import export, heavy, training_view, url_view
from app.charts import moe as moe_charts
from app.charts import training as charts
from app.state import current_config
from app.text import md
from app.widgets import page_header
from engine.runtime import resolve_device
from engine.budget.params import count_params
from engine.limits import MAX_DATA_BYTES
from engine.train.jobs import AB_CHOICES, TrainJob, run_estimate_s
from engine.train.loop import TrainConfig, model_for
from engine.train.store import RunningError, RunStore, StoreError, move_aside

JOB = "train_job"
URL = training_view.URL_PARAMS
cfg = current_config()
page_header(f"Training: {cfg.name}", cfg)
job = st.session_state.get(JOB)
running = job is not None and job.running
device = resolve_device("auto")
st.caption(f"Trains on **{device}** in fp32 in the background (the page stays usable). Offline data only; every "
           "run is written step by step to the run store, so it survives a reload.")

c, sizes = st.columns([2, 2, 2]), training_view.SIZES
source = url_view.bound("t_data", url_view.choice(URL["t_data"], list(training_view.DATA)), "names", c[0].selectbox,
                        "Data", list(training_view.DATA), format_func=training_view.DATA.get, disabled=running)
size = url_view.bound("t_size", url_view.choice(URL["t_size"], sizes), sizes[0], c[1].radio, "Model size", sizes,
                      horizontal=True, disabled=running,
                      help="small: this config's architecture (norms, FFN, positions, attention kind, layout) at "
                           "d_model 64, 2 layers, 4 heads, so a CPU run takes seconds.")
ab_options = [training_view.SINGLE, *AB_CHOICES]
ab = url_view.bound("t_ab", url_view.choice(URL["t_ab"], ab_options), ab_options[0], c[2].selectbox,
                    "Compare (A/B)", ab_options, disabled=running,
                    help="A/B trains two configs that differ in one knob on the same data with the same seed, "
                         "one after the other, and overlays their curves.")
upload = st.file_uploader("UTF-8 text file", type=["txt", "md", "py", "csv"], key="t_upload",
                          max_upload_size=MAX_DATA_BYTES // 2**20,   # MiB: the engine's training-text limit
                          disabled=running) if source == "upload" else None

d, ts = TrainConfig(), {}   # the run's settings: TrainConfig field -> widget value
with st.expander("Optimizer and run settings", expanded=False):
    boxes = [*st.columns(6), *st.columns(6)]
    for box, (name, s) in zip(boxes, training_view.RUN_SETTINGS.items()):
        parse = url_view.integer if isinstance(s.lo, int) and isinstance(s.hi, int) else url_view.number
        ts[name] = url_view.bound(s.key, parse(URL[s.key], s.lo, s.hi), getattr(d, name), box.number_input,
                                  s.label, s.lo, s.hi, disabled=running, **s.extra)


def store_problem(e: StoreError) -> None:
    """The store file is unusable: say so (other pages are unaffected) and offer to move it aside."""
    st.error(md(e), icon=":material/error:")
    if st.button("Move the file aside and start a new store", key="t_move_aside"):
        try:
            st.success(f"Moved it to {md(move_aside())}; new runs go to a new store.")
        except OSError as err:
            st.error(f"Could not move it: {md(err)}", icon=":material/error:")


def open_store(show: bool = True) -> RunStore | None:
    """The shared run store, or None when its file cannot be used (the problem shown once, under Stored runs):
    runs then train without being stored."""
    try:
        return RunStore()
    except StoreError as e:
        if show:
            store_problem(e)
        return None


b1, b2, _ = st.columns([1, 1, 4])
off = heavy.refusal()
if off:
    st.caption(off)
if b1.button("Start training", type="primary", key="t_start", disabled=running or bool(off)) and not running:
    prepared = training_view.plan_run(cfg, ts, source, size, ab,
                                      (upload.name, upload.getvalue()) if upload is not None else None, device)
    if not isinstance(prepared, str):   # the server's limits, then a place in its queue
        params = max(count_params(model_for(c, prepared.data, prepared.tc)).total for c in prepared.configs.values())
        why = heavy.refusal(params, prepared.tc.steps)
        ticket = why or heavy.enter(f"training {cfg.name}", run_estimate_s(*prepared, str(device)))
        prepared = ticket if isinstance(ticket, str) else prepared
    if isinstance(prepared, str):
        st.error(md(prepared), icon=":material/error:")
    else:
        st.session_state[JOB] = TrainJob(*prepared, store=open_store(show=False), device=str(device),
                                         ticket=ticket).start()
        st.rerun()   # redraw with Start disabled, Stop enabled and the fragment polling
if b2.button("Stop", key="t_stop", disabled=not running):
    job.stop.set()


def _moe_section(curves: dict, key: str, download: bool = True) -> None:
    """Router losses and, per run, the tokens each expert got in each MoE layer (a mixture of experts only)."""
    export.chart(moe_charts.router_losses_figure(curves), f"{key}_router", "router-losses", download=download)
    for i, (label, steps) in enumerate(curves.items()):
        if moe_charts.has_moe({label: steps}):
            export.chart(moe_charts.expert_load_figure(steps, label), f"{key}_load_{i}", f"expert-load-{i}",
                         download=download)
    st.caption("Expert load: tokens routed to each expert in each MoE layer at the latest step (each token counts "
               "k times). Red above the balanced share, blue below; the load-balancing loss pushes towards white.")


@st.fragment(run_every=1.0 if running else None)
def live() -> None:
    """Polls the background job: progress, curves; once it is done, results and samples."""
    job = st.session_state.get(JOB)
    if job is None:
        st.info("Set the data and model above and press **Start training**.")
        return
    if heavy.show_waiting(job, "trained"):
        return
    runs = f" ({len(job.configs)} runs of {job.tc.steps:,}, one after the other)" if len(job.configs) > 1 else ""
    st.progress(job.progress, text=f"{'running…' if job.running else 'done:'} {job.steps_done:,} of "
                                   f"{job.total_steps:,} optimizer steps trained{runs}")
    curves = {k: v for k, v in job.records.items() if v}
    if curves:
        done = not job.running   # the download buttons only once the curves stop changing
        export.chart(charts.loss_figure(curves), "t_loss", "training-loss", download=done)
        with st.expander("lr, gradient norm, max logit, log Z"):
            export.chart(charts.diagnostics_figure(curves), "t_diag", "training-diagnostics", download=done)
        if moe_charts.has_moe(curves):
            _moe_section(curves, "t", download=done)
    if job.running:
        return
    if job.error:
        st.error(f"The run failed: {md(job.error)}", icon=":material/error:")
    for name, r in job.results.items():
        show = {"finished": st.success, "stopped": st.warning, "diverged": st.error}[r.status]
        show(f"**{md(name)}** (run {r.run_id}, {r.params:,} params): {md(r.message)}")
        if r.samples:
            st.caption(training_view.samples_caption(name, r.samples))
    if job.results:
        st.caption(f"Val loss: mean cross-entropy over the same {job.tc.eval_batches} held-out batches before the "
                   f"first update and after the last. {training_view.speed_text(job.results)}")
    if len(job.results) > 1:
        noisy = {k: training_view.is_noisy(r.tokens_per_s_spread) for k, r in job.results.items()}
        export.chart(charts.speed_figure({k: r.tokens_per_s for k, r in job.results.items()}, noisy),
                     "t_speed", "training-speed")
    if st.session_state.get("t_seen_done") is not job:   # once per job: show its runs below, refresh buttons
        st.session_state["t_seen_done"] = job
        st.session_state["t_chosen"] = [r.run_id for r in job.results.values() if r.run_id is not None]
        if running:
            st.rerun()


live()

st.header("Stored runs")
store, runs = open_store(), []
try:
    runs = store.list_runs() if store is not None else []
except StoreError as e:
    store_problem(e)
    store = None
if store is not None and not runs:
    st.caption(f"No runs stored yet in {store.path}.")
elif store is not None:
    st.dataframe(training_view.stored_runs_rows(runs), hide_index=True, width="stretch", key="t_runs")
    labels = training_view.run_labels(runs)
    kept = [i for i in st.session_state.get("t_chosen", [runs[0]["id"]]) if i in labels]   # drop deleted runs
    st.session_state["t_chosen"] = kept
    chosen = st.multiselect("Reload runs (overlay their curves)", list(labels), format_func=labels.get,
                            key="t_chosen")
    if chosen:
        stored = {labels[i]: store.get_run(i) for i in chosen}
        export.chart(charts.loss_figure({k: v["steps"] for k, v in stored.items()}), "t_stored_loss",
                     "stored-runs-loss")
        if moe_charts.has_moe({k: v["steps"] for k, v in stored.items()}):
            _moe_section({k: v["steps"] for k, v in stored.items()}, "t_stored")
        first_id = chosen[0]
        first = stored[labels[first_id]]
        if first["samples"]:
            st.caption(training_view.samples_caption(f"run {first_id}", first["samples"]))
        a, b, _ = st.columns([1, 1, 3])
        a.download_button(f"CSV of run {first_id}", lambda: store.export_csv(first_id), file_name=f"run-{first_id}.csv",
                          mime="text/csv", key="t_csv", on_click="ignore", icon=":material/download:")
        if b.button(f"Delete run {first_id}", key="t_delete", disabled=first["status"] == "running",
                    help="A run still being trained cannot be deleted; stop it first."):
            try:
                store.delete_run(first_id)
                st.rerun()
            except (RunningError, StoreError) as e:
                st.error(md(e), icon=":material/error:")
