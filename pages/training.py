"""Training: short runs on offline data in a background thread, live curves, A/B comparisons, stored runs."""
import streamlit as st

from app import export, train_charts
from app.state import current_config
from app.text import md
from app.widgets import metric_row
from engine.config import ConfigError
from engine.guard import MemoryRefusal, check_fits
from engine.train.data import load_data, load_text
from engine.train.jobs import AB_CHOICES, TrainJob, ab_configs
from engine.runtime import resolve_device
from engine.train.loop import TrainConfig, model_for, small_version
from engine.train.store import RunningError, RunStore, StoreError, move_aside

JOB = "train_job"
cfg = current_config()
st.title(f"Training: {md(cfg.name)}")
metric_row(cfg)
job = st.session_state.get(JOB)
running = job is not None and job.running
device = resolve_device("auto")
st.caption(f"Trains on **{device}** in fp32 in the background (the page stays usable). Offline data only; every "
           "run is written step by step to the run store, so it survives a reload.")

DATA = {"names": "first names (character level)", "stdlib": "Python standard library source (byte level)",
        "upload": "a text file you upload (character level)"}
c = st.columns([2, 2, 2])
source = c[0].selectbox("Data", list(DATA), format_func=DATA.get, key="t_data", disabled=running)
size = c[1].radio("Model size", ["small", "as configured"], key="t_size", horizontal=True, disabled=running,
                  help="small: this config's architecture (norms, FFN, positions, attention kind, layout) at "
                       "d_model 64, 2 layers, 4 heads, so a CPU run takes seconds.")
ab = c[2].selectbox("Compare (A/B)", ["single run"] + list(AB_CHOICES), key="t_ab", disabled=running,
                    help="A/B trains two configs that differ in one knob on the same data with the same seed, "
                         "one after the other, and overlays their curves.")
upload = st.file_uploader("UTF-8 text file", type=["txt", "md", "py", "csv"], key="t_upload",
                          disabled=running) if source == "upload" else None

d = TrainConfig()
with st.expander("Optimizer and run settings", expanded=False):
    r1, r2 = st.columns(6), st.columns(6)
    steps = r1[0].number_input("Steps", 1, 100_000, d.steps, key="t_steps", disabled=running)
    batch = r1[1].number_input("Batch (sequences)", 1, 4096, d.batch, key="t_batch", disabled=running)
    seq = r1[2].number_input("Sequence (tokens)", 2, 4096, d.seq, key="t_seq", disabled=running)
    lr = r1[3].number_input("Peak lr", 1e-6, 1e4, d.lr, format="%.2e", key="t_lr", disabled=running,
                            help="Linear warmup to this, then cosine decay to lr x final ratio.")
    warmup = r1[4].number_input("Warmup steps", 0, 100_000, d.warmup, key="t_warmup", disabled=running)
    ratio = r1[5].number_input("Final lr ratio", 0.0, 1.0, d.min_lr_ratio, key="t_ratio", disabled=running)
    wd = r2[0].number_input("Weight decay", 0.0, 10.0, d.weight_decay, key="t_wd", disabled=running,
                            help="AdamW decoupled decay on matrices; none on gains and biases.")
    clip = r2[1].number_input("Grad clip (0 = off)", 0.0, 100.0, d.grad_clip, key="t_clip", disabled=running)
    zl = r2[2].number_input("z-loss coefficient", 0.0, 1.0, d.z_loss, format="%.1e", key="t_zloss",
                            disabled=running, help="Adds coef x mean(log Z)^2 to the loss; keeps log Z near 0.")
    dropout = r2[3].number_input("Dropout", 0.0, 0.9, d.dropout, key="t_dropout", disabled=running)
    seed = r2[4].number_input("Seed", 0, 2**31 - 1, d.seed, key="t_seed", disabled=running)
    every = r2[5].number_input("Val loss every k steps", 1, 100_000, d.eval_every, key="t_every", disabled=running)


def prepare():
    """(configs, TrainConfig, data) for the settings above, or an error message."""
    try:
        tc = TrainConfig(steps=int(steps), batch=int(batch), seq=int(seq), lr=float(lr), warmup=int(warmup),
                         min_lr_ratio=float(ratio), weight_decay=float(wd), grad_clip=float(clip), z_loss=float(zl),
                         dropout=float(dropout), seed=int(seed), eval_every=int(every), data=source)
        base = small_version(cfg) if size == "small" else cfg
        configs = {base.name: base} if ab == "single run" else ab_configs(base, ab)
    except ConfigError as e:
        return "; ".join(e.problems)
    if source == "upload":
        if upload is None:
            return "Upload a text file to train on it."
        try:
            data = load_text(upload.getvalue().decode("utf-8"), name=upload.name)
        except UnicodeDecodeError as e:
            return (f"data: {upload.name} is not UTF-8 text (byte {e.start:,} cannot be decoded); "
                    "upload a plain-text file")
        except ValueError as e:
            return f"data: {upload.name} cannot be used ({e})"
    else:
        data = load_data(source, seed=tc.seed)
    try:
        for c in configs.values():
            check_fits(model_for(c, data, tc), device, tc.batch, tc.seq, "fp32", training=True)
    except (ConfigError, MemoryRefusal) as e:
        return str(e)
    return configs, tc, data


def store_problem(e: StoreError) -> None:
    """The store file is unusable: say so (other pages are unaffected) and offer to move it aside."""
    st.error(md(e), icon=":material/error:")
    if st.button("Move the file aside and start a new store", key="t_move_aside"):
        try:
            st.success(f"Moved it to {move_aside()}; new runs go to a new store.")
        except OSError as err:
            st.error(f"Could not move it: {err}", icon=":material/error:")


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
    prepared = prepare()
    if isinstance(prepared, str):
        st.error(md(prepared), icon=":material/error:")
    else:
        st.session_state[JOB] = TrainJob(*prepared, store=open_store(show=False), device=str(device)).start()
        st.rerun()   # redraw with Start disabled, Stop enabled and the fragment polling
if b2.button("Stop", key="t_stop", disabled=not running):
    job.stop.set()


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
        export.chart(train_charts.loss_figure(curves), "t_loss", "training-loss", download=done)
        with st.expander("lr, gradient norm, max logit, log Z"):
            export.chart(train_charts.diagnostics_figure(curves), "t_diag", "training-diagnostics", download=done)
    if job.running:
        return
    if job.error:
        st.error(f"The run failed: {md(job.error)}", icon=":material/error:")
    for name, r in job.results.items():
        show = {"finished": st.success, "stopped": st.warning, "diverged": st.error}[r.status]
        show(f"**{md(name)}** (run {r.run_id}, {r.params:,} params): {md(r.message)}")
        if r.samples:
            st.caption(f"Samples from {md(name)}: " + " · ".join(md(s.replace("\n", "⏎")) for s in r.samples))
    if job.results:
        st.caption(f"Val loss: mean cross-entropy over the same {job.tc.eval_batches} held-out batches before the "
                   "first update and after the last. Tokens/s: batch x sequence tokens per second of the training "
                   "steps only (evaluation and sampling not timed).")
    if len(job.results) > 1:
        export.chart(train_charts.speed_figure({k: r.tokens_per_s for k, r in job.results.items()}), "t_speed",
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
    st.dataframe([{"id": r["id"], "name": r["name"], "data": r["data"], "status": r["status"], "steps": r["steps"],
                   "params": f"{r['params']:,}", "processes": r["world"],
                   "val loss (nats)": " → ".join(f"{v:.3f}" if v is not None else "—"
                                                  for v in (r["initial_loss"], r["final_loss"])),
                   "tokens/s": f"{r['tokens_per_s'] or 0:,.0f}"} for r in runs],
                 hide_index=True, width="stretch", key="t_runs")
    labels = {r["id"]: f"{r['id']}: {r['name']} on {r['data']} ({r['status']})" for r in runs}
    kept = [i for i in st.session_state.get("t_chosen", [runs[0]["id"]]) if i in labels]   # drop deleted runs
    st.session_state["t_chosen"] = kept
    chosen = st.multiselect("Reload runs (overlay their curves)", list(labels), format_func=labels.get,
                            key="t_chosen")
    if chosen:
        stored = {labels[i]: store.get_run(i) for i in chosen}
        export.chart(train_charts.loss_figure({k: v["steps"] for k, v in stored.items()}), "t_stored_loss",
                     "stored-runs-loss")
        first_id = chosen[0]
        first = stored[labels[first_id]]
        if first["samples"]:
            st.caption(f"Samples from run {first_id}: " + " · ".join(md(s.replace("\n", "⏎")) for s in first["samples"]))
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
