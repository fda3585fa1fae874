"""Training: short runs on offline data in a background thread, live curves, A/B comparisons, stored runs."""
import streamlit as st

from app import export, training_view
from app.charts import moe as moe_charts
from app.charts import training as charts
from app.state import current_config
from app.text import md
from app.widgets import page_header
from engine.runtime import resolve_device
from engine.train.jobs import AB_CHOICES, TrainJob
from engine.train.loop import TrainConfig
from engine.train.store import RunningError, RunStore, StoreError, move_aside

JOB = "train_job"
cfg = current_config()
page_header(f"Training: {cfg.name}", cfg)
job = st.session_state.get(JOB)
running = job is not None and job.running
device = resolve_device("auto")
st.caption(f"Trains on **{device}** in fp32 in the background (the page stays usable). Offline data only; every "
           "run is written step by step to the run store, so it survives a reload.")

c = st.columns([2, 2, 2])
source = c[0].selectbox("Data", list(training_view.DATA), format_func=training_view.DATA.get, key="t_data",
                        disabled=running)
size = c[1].radio("Model size", training_view.SIZES, key="t_size", horizontal=True, disabled=running,
                  help="small: this config's architecture (norms, FFN, positions, attention kind, layout) at "
                       "d_model 64, 2 layers, 4 heads, so a CPU run takes seconds.")
ab = c[2].selectbox("Compare (A/B)", [training_view.SINGLE] + list(AB_CHOICES), key="t_ab", disabled=running,
                    help="A/B trains two configs that differ in one knob on the same data with the same seed, "
                         "one after the other, and overlays their curves.")
upload = st.file_uploader("UTF-8 text file", type=["txt", "md", "py", "csv"], key="t_upload",
                          disabled=running) if source == "upload" else None

d, ts = TrainConfig(), {}   # the run's settings: TrainConfig field -> widget value
with st.expander("Optimizer and run settings", expanded=False):
    r1, r2 = st.columns(6), st.columns(6)
    ts["steps"] = r1[0].number_input("Steps", 1, 100_000, d.steps, key="t_steps", disabled=running)
    ts["batch"] = r1[1].number_input("Batch (sequences)", 1, 4096, d.batch, key="t_batch", disabled=running)
    ts["seq"] = r1[2].number_input("Sequence (tokens)", 2, 4096, d.seq, key="t_seq", disabled=running)
    ts["lr"] = r1[3].number_input("Peak lr", 1e-6, 1e4, d.lr, format="%.2e", key="t_lr", disabled=running,
                                  help="Linear warmup to this, then cosine decay to lr x final ratio.")
    ts["warmup"] = r1[4].number_input("Warmup steps", 0, 100_000, d.warmup, key="t_warmup", disabled=running)
    ts["min_lr_ratio"] = r1[5].number_input("Final lr ratio", 0.0, 1.0, d.min_lr_ratio, key="t_ratio",
                                            disabled=running)
    ts["weight_decay"] = r2[0].number_input("Weight decay", 0.0, 10.0, d.weight_decay, key="t_wd", disabled=running,
                                            help="AdamW decoupled decay on matrices; none on gains and biases.")
    ts["grad_clip"] = r2[1].number_input("Grad clip (0 = off)", 0.0, 100.0, d.grad_clip, key="t_clip",
                                         disabled=running)
    ts["z_loss"] = r2[2].number_input("z-loss coefficient", 0.0, 1.0, d.z_loss, format="%.1e", key="t_zloss",
                                      disabled=running,
                                      help="Adds coef x mean(log Z)^2 to the loss; keeps log Z near 0.")
    ts["dropout"] = r2[3].number_input("Dropout", 0.0, 0.9, d.dropout, key="t_dropout", disabled=running)
    ts["seed"] = r2[4].number_input("Seed", 0, 2**31 - 1, d.seed, key="t_seed", disabled=running)
    ts["eval_every"] = r2[5].number_input("Val loss every k steps", 1, 100_000, d.eval_every, key="t_every",
                                          disabled=running)

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
if b1.button("Start training", type="primary", key="t_start", disabled=running) and not running:
    prepared = training_view.plan_run(cfg, ts, source, size, ab,
                                      (upload.name, upload.getvalue()) if upload is not None else None, device)
    if isinstance(prepared, str):
        st.error(md(prepared), icon=":material/error:")
    else:
        st.session_state[JOB] = TrainJob(*prepared, store=open_store(show=False), device=str(device)).start()
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
                   "first update and after the last. Tokens/s: batch x sequence tokens per second of the training "
                   "steps only (evaluation and sampling not timed).")
    if len(job.results) > 1:
        export.chart(charts.speed_figure({k: r.tokens_per_s for k, r in job.results.items()}), "t_speed",
                     "training-speed")
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
        a.download_button(f"CSV of run {first_id}", store.export_csv(first_id), file_name=f"run-{first_id}.csv",
                          mime="text/csv", key="t_csv", on_click="ignore", icon=":material/download:")
        if b.button(f"Delete run {first_id}", key="t_delete", disabled=first["status"] == "running",
                    help="A run still being trained cannot be deleted; stop it first."):
            try:
                store.delete_run(first_id)
                st.rerun()
            except (RunningError, StoreError) as e:
                st.error(md(e), icon=":material/error:")
