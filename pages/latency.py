"""Latency: measured forward (or forward + backward) time over a batch x sequence sweep, and decode-step time
vs context with a KV cache for MHA, GQA and MQA."""
import time

import streamlit as st

from app import compute, export, heavy, latency_plan, latency_view, url_view
from app.charts import latency as charts
from app.state import current_config
from app.text import md
from app.widgets import page_header
from engine.guard import MemoryRefusal, check_fits
from engine.layers.kv_heads import attention_variants
from engine.measure import latency as lat
from engine.measure.decode import check_decode_fits, measure_decode
from engine.measure.estimate import decode_estimate, sweep_estimate
from engine.runtime import TORCH_DTYPES, resolve_device

cfg = current_config()
page_header(f"Latency: {cfg.name}", cfg)

dev = resolve_device("auto")
on_gpu = dev.type == "cuda"
st.caption(latency_view.device_text(dev) + " The real model in the chosen dtype with seeded random weights and "
           "random tokens. The points of a sweep (and the variants of the decode chart) are timed in interleaved "
           "rounds, so load from another process hits them alike; rounds stop once every point's IQR is within 5% "
           "of its median or the time budget is spent. Median and interquartile range (IQR) after a warm-up call; "
           "one session times at a time on this machine.")

c = st.columns(5, vertical_alignment="bottom")
dtypes = list(TORCH_DTYPES) if on_gpu else ["fp32", "bf16"]
dtype = url_view.bound("lat_dtype", url_view.choice("dtype", dtypes), dtypes[0], c[0].selectbox, "dtype", dtypes,
                       help="Weights and activations in this precision. CPUs run bf16 mostly through conversions.")
mode = url_view.bound("lat_mode", url_view.choice("mode", lat.MODES), lat.MODES[0], c[1].selectbox, "What is timed",
                      lat.MODES, format_func=lambda m: {"forward": "forward (no grad)", "train": "forward + backward"}[m],
                      help="forward: inference, no gradients kept; forward + backward: one training step without "
                           "the optimizer.")
# the default grid depends on the measured peak and the load: fixed per session, so a rerun never resets a choice,
# and always written into the link (another session could pick another default)
defaults = st.session_state.setdefault("lat_defaults", {})
if (cfg, dtype, mode) not in defaults:
    defaults[(cfg, dtype, mode)] = latency_plan.default_sweep(cfg, dev, dtype, mode)
default_batches, default_seqs = defaults[(cfg, dtype, mode)]
batches = url_view.bound("lat_batches", url_view.choices("batches", latency_plan.batch_choices()), default_batches,
                         c[2].multiselect, "Batch sizes (sequences)", latency_plan.batch_choices(), always=True)
seqs = url_view.bound("lat_seqs", url_view.choices("seqs", latency_plan.seq_choices(cfg)), default_seqs,
                      c[3].multiselect, "Sequence lengths (tokens)", latency_plan.seq_choices(cfg), always=True,
                      help=f"At most context_length = {cfg.context_length:,}.")
budget = url_view.bound("lat_budget", url_view.number("budget", 1.0, 600.0), latency_plan.SWEEP_BUDGET_S,
                        c[4].number_input, "Time budget (s)", 1.0, 600.0, step=5.0,
                        help="Timing rounds stop when this is spent, or earlier once every point's spread is "
                             "small; never before 5 rounds (a median and quartiles of fewer say little).")

st.header("Batch x sequence sweep")
sweep_key = (cfg, dtype, mode, tuple(sorted(batches)), tuple(sorted(seqs)))
if not batches or not seqs:
    st.info("Pick at least one batch size and one sequence length.")
else:
    try:
        check_fits(cfg, dev, max(batches), max(seqs), dtype, mode == "train")
    except MemoryRefusal as e:
        st.error(md(e), icon=":material/block:")
    else:
        est = sweep_estimate(cfg, sorted(batches), sorted(seqs), mode, dtype, dev, budget)
        st.caption(f"Estimated duration: **{est.text}** ({est.how})." + (f" **{est.note}.**" if est.note else ""))
        if st.button("Measure the sweep", type="primary", key="lat_run"):
            stop = st.empty()   # any click reruns the page, which ends the sweep after the current round
            stop.button("Stop", key="lat_stop", help="Stops after the current round; every point keeps its rounds.")
            bar = st.progress(0.0, text=f"Building the model… (estimated {est.text})")
            if lat.busy():
                st.info("Another session is timing on this machine; this sweep starts when it is done.")

            def on_round(p, so_far) -> None:
                st.session_state["lat_sweep"] = (sweep_key, so_far)     # a Stop keeps the rounds so far
                bar.progress(latency_view.progress_share(p), text=latency_view.progress_text(p, "Sweep"))

            with heavy.turn(f"latency sweep of {cfg.name}", est.high_s, compute.params(cfg).total) as go:
                if go:
                    lat.latency_sweep(cfg, sorted(batches), sorted(seqs), dtype, str(dev), mode, budget, on_round)
            bar.empty()
            stop.empty()

key, results = st.session_state.get("lat_sweep", (None, []))
if key == sweep_key and results:
    a, b = st.columns(2)
    with a:
        export.chart(charts.latency_figure(results), "lat_latency", f"{cfg.name}-latency")
    with b:
        export.chart(charts.throughput_figure(results), "lat_throughput", f"{cfg.name}-throughput")
    st.dataframe(latency_view.sweep_rows(cfg, results), hide_index=True, width="stretch", key="lat_table")
    st.caption(latency_view.sweep_caption(cfg, results, on_gpu))

st.header("Decode: one new token vs context already cached")
variants = attention_variants(cfg)
contexts = latency_plan.decode_contexts(cfg, dev.type)
if not contexts:
    st.info(f"context_length = {cfg.context_length} leaves no cached token before the timed one.")
else:
    try:   # said before the button, as the sweep's refusal is (no estimate of a run that would be refused)
        check_decode_fits(variants, contexts, 1, dtype, dev)
    except MemoryRefusal as e:
        st.error(md(e), icon=":material/block:")
        contexts = []
if contexts:
    est = decode_estimate(variants, contexts, 1, dtype, dev, latency_plan.DECODE_BUDGET_S)
    st.caption(f"Each step reads every cached key and value: {', '.join(variants)} keep "
               + ", ".join(str(v.kv_heads) for v in variants.values())
               + f" key/value heads. Batch 1, contexts {contexts[0]:,} to {contexts[-1]:,} tokens, {dtype}. The cache "
               "is filled once and the timed token's entry is dropped after each call, so every call sees the same "
               f"cache. Estimated duration: **{est.text}** ({est.how})." + (f" {est.note}." if est.note else ""))
decode_key = (cfg, dtype, tuple(contexts))
if contexts and st.button("Measure decode: " + " vs ".join(variants), key="lat_decode"):
    stop = st.empty()
    stop.button("Stop", key="lat_decode_stop", help="Stops after the current context; the curves so far stay.")
    bar = st.progress(0.0, text=f"Building the models and filling the caches… (estimated {est.text})")
    started = time.perf_counter()

    def on_point(done: int, total: int, so_far) -> None:
        st.session_state["lat_decode_curves"] = (decode_key, so_far)   # a Stop keeps the curves so far
        bar.progress(done / total, text=latency_view.decode_progress_text(done, total, so_far,
                                                                          time.perf_counter() - started))

    try:
        with heavy.turn(f"decode comparison of {cfg.name}", est.high_s, compute.params(cfg).total) as go:
            if go:
                measure_decode(variants, contexts, 1, dtype, str(dev), latency_plan.DECODE_BUDGET_S,
                               on_point=on_point)
    except MemoryRefusal as e:
        st.warning(md(e), icon=":material/block:")
    bar.empty()
    stop.empty()
key, curves = st.session_state.get("lat_decode_curves", (None, {}))
if key == decode_key and any(curves.values()):
    export.chart(charts.decode_figure({k: v for k, v in curves.items() if v}), "lat_decode_curves",
                 f"{cfg.name}-decode")
    st.caption(latency_view.decode_caption(curves))
