"""Latency: measured forward (or forward + backward) time over a batch x sequence sweep, and decode-step time
vs context with a KV cache for MHA, GQA and MQA."""
import streamlit as st

from app import export, train_charts
from app.state import current_config
from app.text import md
from app.widgets import metric_row
from engine.guard import MemoryRefusal, check_fits
from engine.measure import latency as lat
from engine.measure import plan
from engine.runtime import TORCH_DTYPES, resolve_device
from engine.units import fmt_bytes, fmt_flops

cfg = current_config()
st.title(f"Latency: {md(cfg.name)}")
metric_row(cfg)

dev = resolve_device("auto")
on_gpu = dev.type == "cuda"
st.caption(f"Measured on **{lat.device_label(dev)}**, the real model in the chosen dtype with seeded random weights "
           "and random tokens. "
           + ("CUDA events around each call, then a synchronize (GPU kernels run asynchronously). " if on_gpu else
              "torch.utils.benchmark with all of this process's threads. ")
           + "Median and interquartile range (IQR) after warm-up; one session times at a time on this machine.")


c = st.columns(4)
dtype = c[0].selectbox("dtype", list(TORCH_DTYPES) if on_gpu else ["fp32", "bf16"], key="lat_dtype",
                       help="Weights and activations in this precision. CPUs run bf16 mostly through conversions.")
mode = c[1].selectbox("What is timed", lat.MODES, key="lat_mode",
                      format_func=lambda m: {"forward": "forward (inference, no grad)",
                                             "train": "forward + backward"}[m])
batches = c[2].multiselect("Batch sizes (sequences)", plan.batch_choices(), default=list(plan.DEFAULT_BATCHES),
                           key="lat_batches")
seqs = c[3].multiselect("Sequence lengths (tokens)", plan.seq_choices(cfg), default=plan.default_seqs(cfg),
                        key="lat_seqs", help=f"At most context_length = {cfg.context_length:,}.")

st.header("Batch x sequence sweep")
sweep_key = (cfg, dtype, mode, tuple(sorted(batches)), tuple(sorted(seqs)))
if not batches or not seqs:
    st.info("Pick at least one batch size and one sequence length.")
else:
    try:
        check_fits(cfg, dev, max(batches), max(seqs), dtype, mode == "train")
    except MemoryRefusal as e:
        st.error(str(e), icon=":material/block:")
    else:
        if st.button("Measure the sweep", type="primary", key="lat_run"):
            stop = st.empty()   # any click reruns the page, which ends the sweep after the current point
            stop.button("Stop", key="lat_stop", help="Stops after the current point; the points so far stay.")
            results: list = []
            st.session_state["lat_sweep"] = (sweep_key, results)
            bar = st.progress(0.0, text="Building the model…")
            if lat.LOCK.locked():
                st.info("Another session is timing on this machine; this sweep starts when it is done.")

            def on_point(done: int, total: int, r) -> None:
                results.append(r)
                bar.progress(done / total, text=f"{done}/{total}: batch {r.batch}, seq {r.seq:,}: {r.median_ms:.3f} ms")

            lat.latency_sweep(cfg, sorted(batches), sorted(seqs), dtype, str(dev), mode, on_point=on_point)
            bar.empty()
            stop.empty()

key, results = st.session_state.get("lat_sweep", (None, []))
if key == sweep_key and results:
    a, b = st.columns(2)
    with a:
        export.chart(train_charts.latency_figure(results), "lat_latency", f"{cfg.name}-latency")
    with b:
        export.chart(train_charts.throughput_figure(results), "lat_throughput", f"{cfg.name}-throughput")
    rows = []
    for r in results:
        m = lat.memory_check(cfg, r)
        rows.append({"batch": r.batch, "seq": f"{r.seq:,}", "median ms": f"{r.median_ms:,.3f}",
                     "IQR ms": f"{r.iqr_ms:,.3f}", "calls timed": f"{r.runs:,}", "tokens/s": f"{r.tokens_per_s:,.0f}",
                     "achieved": fmt_flops(r.achieved_tflops * 1e12, "FLOP/s"),
                     "MFU": f"{100 * r.mfu:.3g}%" if r.mfu is not None else "no device peak",
                     "peak memory (measured)": fmt_bytes(m.measured) if m else "not available on CPU",
                     "memory estimate": fmt_bytes(lat.memory_estimate(cfg, r.batch, r.seq, dtype, mode)[0]),
                     "estimate error": f"{m.error_pct:+.1f}%" if m else "—"})
    st.dataframe(rows, hide_index=True, width="stretch", key="lat_table")
    peak_name = results[0].profile or "no profile"
    st.caption(f"FLOPs per call from the closed form (engine.budget.flops, full attention square as MFU counts "
               f"it); MFU = achieved FLOP/s / peak of **{peak_name}** in {dtype}. Memory estimate: "
               f"{lat.memory_estimate(cfg, 1, 1, dtype, mode)[1]}. "
               + ("Peak memory is torch.cuda.max_memory_allocated during the timing; estimate error = "
                  "(estimate - measured) / measured." if on_gpu else
                  "Peak memory is measured on CUDA only: not available on CPU."))

st.header("Decode: one new token vs context already cached")
variants = lat.attention_variants(cfg)
contexts = plan.decode_contexts(cfg, dev.type)
if not contexts:
    st.info(f"context_length = {cfg.context_length} leaves no cached token before the timed one.")
else:
    st.caption(f"Each step reads every cached key and value: {', '.join(variants)} keep "
               + ", ".join(str(v.kv_heads) for v in variants.values())
               + f" key/value heads. Batch 1, contexts {contexts[0]:,} to {contexts[-1]:,} tokens, {dtype}. The cache "
               "is filled once and the timed token's entry is dropped after each call, so every call sees the same "
               "cache.")
decode_key = (cfg, dtype, tuple(contexts))
if contexts and st.button("Measure decode: " + " vs ".join(variants), key="lat_decode"):
    stop = st.empty()
    stop.button("Stop", key="lat_decode_stop", help="Stops after the current point; the curves so far stay.")
    curves: dict = {}
    st.session_state["lat_decode_curves"] = (decode_key, curves)
    bar = st.progress(0.0, text="Building…")
    for i, (label, vcfg) in enumerate(variants.items()):
        points = curves.setdefault(label, [])

        def on_point(done: int, total: int, p, i=i, label=label, points=points) -> None:
            points.append(p)
            bar.progress((i + done / total) / len(variants),
                         text=f"{label}: context {p.context:,}: {p.median_ms:.3f} ms")

        try:
            lat.measure_decode(vcfg, contexts, 1, dtype, str(dev), 0.1, on_point=on_point)
        except MemoryRefusal as e:
            st.error(f"{label}: {md(e)}", icon=":material/block:")
    bar.empty()
    stop.empty()
key, curves = st.session_state.get("lat_decode_curves", (None, {}))
if key == decode_key and any(curves.values()):
    export.chart(train_charts.decode_figure({k: v for k, v in curves.items() if v}), "lat_decode_curves",
                 f"{cfg.name}-decode")
    last = {k: v[-1] for k, v in curves.items() if v}
    st.caption("At the longest context: " + "; ".join(
        f"{k} {p.median_ms:.3f} ms/token (IQR {p.iqr_ms:.3f} ms) with a {fmt_bytes(p.cache_bytes)} cache"
        for k, p in last.items())
        + ". Small models on a CPU are bound by the weights, not the cache; the gap opens with long contexts "
        "and big batches.")
