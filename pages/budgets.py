"""Budgets: memory per precision policy, KV cache vs context, FLOPs split, roofline, and estimate vs measurement."""
import streamlit as st
import torch

from app import budget_measure, compute, export, heavy, tables, url_view
from app.charts import budgets as charts
from app.state import current_config
from app.text import md
from app.widgets import page_header
from app.budget_view import MARKED, context_caption
from engine.budget.context_memory import memory_devices
from engine.budget.devices import DEVICE_PROFILES
from engine.budget.flops import gap_note
from engine.budget.memory import DTYPE_BYTES, OPTIMIZERS, RECOMPUTE, pure_policy
from engine.layers.attention import ATTENTION_IMPLS
from engine.measure.estimate import measure_estimate
from engine.runtime import default_device
from engine.units import fmt_bytes

cfg = current_config()
page_header(f"Budgets: {cfg.name}", cfg)

c = st.columns(6)
batch = url_view.bound("b_batch", url_view.integer("batch", 1, 4096), 1, c[0].number_input, "Batch (sequences)",
                       1, 4096)
seq = url_view.bound("b_seq", url_view.integer("seq", 1, cfg.context_length), min(cfg.context_length, 2048),
                     c[1].number_input, "Sequence (tokens)", 1, cfg.context_length,
                     help=f"At most context_length = {cfg.context_length:,}.")
optimizer = url_view.bound("b_opt", url_view.choice("optimizer", OPTIMIZERS), OPTIMIZERS[0], c[2].selectbox,
                           "Optimizer", OPTIMIZERS)
recompute = url_view.bound("b_recompute", url_view.choice("recompute", RECOMPUTE), RECOMPUTE[0], c[3].selectbox,
                           "Recompute", RECOMPUTE,
                           help="Activation checkpointing: selective drops the attention scores, full keeps only "
                                "each block's input.")
attention = url_view.bound("b_attn", url_view.choice("kernel", ATTENTION_IMPLS), ATTENTION_IMPLS[0], c[4].selectbox,
                           "Attention kernel", ATTENTION_IMPLS,
                           help="sdpa (fused) saves no T x T scores; explicit saves them, as the plots need.")
infer_dtype = url_view.bound("b_dtype", url_view.choice("dtype", list(DTYPE_BYTES)), list(DTYPE_BYTES)[1],
                             c[5].selectbox, "Inference dtype", list(DTYPE_BYTES))

st.header("Memory")
if cfg.n_experts is not None:
    pc = compute.params(cfg)
    st.info(f"Mixture of experts: memory below is from **all {pc.total:,} parameters** (every expert must be "
            f"stored), FLOPs further down from the **{pc.active:,} active** ones (router, shared experts and "
            f"{cfg.experts_per_token} of {cfg.n_experts} routed experts per token), because each token is "
            "computed by k experts but any token may pick any of them.", icon=":material/info:")
train = compute.policy_memories(cfg, batch, seq, optimizer, recompute, attention)
infer = compute.memory(cfg, batch, seq, infer_dtype, pure_policy(infer_dtype), optimizer, recompute, attention)
export.chart(charts.memory_figure(train, infer, f"inference ({infer_dtype})", optimizer), "b_memory",
             f"{cfg.name}-memory")
st.caption("Closed forms from engine/budget/memory.py; activations are what autograd saves for one forward + "
           "loss at this batch and sequence (engine/budget/activations.py); the inference bar holds the weights "
           "and a KV cache of the whole sequence.")
with st.expander("Formulas (mixed-bf16)"):
    mixed = train["mixed-bf16"]
    st.dataframe(tables.formulas_table(mixed, tuple(mixed.formulas), fmt_bytes), hide_index=True, width="stretch")

st.header("KV cache vs context length")
grid, series = compute.kv_series(cfg, batch, infer_dtype)
export.chart(charts.kv_vs_context_figure(list(grid), series, next(iter(series))), "b_kv", f"{cfg.name}-kv-cache")
st.caption(f"Closed form: 2 x layers x tokens x kv_heads x head_dim x {DTYPE_BYTES[infer_dtype]} bytes at batch "
           f"{batch}; a window layer holds at most its window. Fewer key/value heads (GQA, MQA) shrink it "
           "proportionally; a window caps it." + (
               f" MLA holds layers x tokens x (kv_lora_rank {cfg.kv_lora_rank:,} + qk_rope_head_dim "
               f"{cfg.qk_rope_head_dim:,}) x {DTYPE_BYTES[infer_dtype]} bytes: the latent and the shared rotary "
               "key; the expanded line is the per-head keys and values a plain cache would keep." if cfg.mla else "")
           + (f" Sparse attention adds the lightning indexer's key per token in {sum(cfg.indexer_layers):,} layers: "
              f"{cfg.index_head_dim:,} FP8 bytes and an fp32 scale per 128 of them, as DeepSeek's kernels cache it "
              "(its own part above; transformers keeps it in the cache dtype instead)."
              if cfg.mla and cfg.sparse_attention else ""))

st.header("Inference memory vs context: weights, KV cache and state")
g1, g2, g3 = st.columns([1, 3, 1.2], vertical_alignment="bottom")
gpus = url_view.bound("b_gpus", url_view.integer("replica_gpus", 1, 1024), 1, g1.number_input,
                      "GPUs holding one replica", 1, 1024,
                      help="The dotted lines are this many times each GPU's memory (weights and cache split across "
                           "them, nothing else held).")
names = memory_devices()
marked = url_view.bound("b_mark_gpus", url_view.choices("mark_gpus", names), [n for n in MARKED if n in names],
                        g2.multiselect, "GPUs to mark", names)
zoom = url_view.bound("b_zoom", url_view.flag("zoom"), False, g3.toggle, "Zoom on the cache",
                      help="Start the memory axis just below the weights, so a cache small beside them shows.")
hybrid, dense, marks = compute.context_memories(cfg, batch, infer_dtype, gpus, tuple(marked))
export.chart(charts.context_memory_figure(hybrid, dense, marks, zoom), "b_context", f"{cfg.name}-memory-vs-context")
st.caption(md(context_caption(cfg, hybrid, dense, marks, batch, infer_dtype)))

st.header("FLOPs")
causal = url_view.bound("b_causal", url_view.flag("causal"), True, st.toggle,
                       "Count only the query-key pairs a causal, windowed kernel computes",
                       help="On: the headline convention (causal halving, window limits, local/global layers). Off: "
                            "the full T x T square, as FlopCounterMode and the 12·L·H·Q·T rule count it.")
fb = compute.flops(cfg, batch, seq, causal)
a, b = st.columns(2)
with a:
    export.chart(charts.flops_figure(fb), "b_flops", f"{cfg.name}-flops")
with b:
    full = compute.flops(cfg, batch, seq, False) if causal else None
    export.chart(charts.flops_rules_figure(fb, full), "b_flops_rules", f"{cfg.name}-flops-rules")
st.caption("Closed form from engine/budget/flops.py: a multiply-add is 2 FLOPs, only matrix products count; "
           "backward is twice forward. " + gap_note(cfg, seq))

st.header("Roofline")
r1, r2 = st.columns([1, 3])
device = url_view.bound("b_device", url_view.choice("device", list(DEVICE_PROFILES)), next(iter(DEVICE_PROFILES)),
                        r1.selectbox, "Device", list(DEVICE_PROFILES))
r1.caption(DEVICE_PROFILES[device].source)
points = compute.rooflines(cfg, device, batch, seq, infer_dtype)
for p in points.values():
    r1.markdown(f"- {p.verdict}")
with r2:
    export.chart(charts.roofline_figure(DEVICE_PROFILES[device], points, infer_dtype), "b_roofline",
                 f"{cfg.name}-roofline")

st.header("Estimate vs measurement")
dev = default_device()
m_batch, m_seq, capped = budget_measure.measure_sizes(batch, seq, dev)
st.caption(f"Builds the model for real on **{dev}** at batch {m_batch:,}, sequence {m_seq:,} in {infer_dtype} and "
           "compares: activation bytes (saved-tensor hooks), KV-cache bytes (KVCache.nbytes after a decode step); "
           f"FLOPs are counted by FlopCounterMode on the meta device at batch {batch:,}, sequence {seq:,} (any width, "
           f"up to {budget_measure.MEASURE_MAX_LAYERS:,} layers).")
if capped:
    st.info(capped, icon=":material/compress:")
plan = budget_measure.measure_plan(cfg, batch, seq, dev)
est = measure_estimate(cfg, plan.flops_at, plan.built_at, infer_dtype, torch.device(dev))
st.caption(f"Estimated duration: **{est.text}** ({est.how}).")
if st.button("Measure", type="primary", key="b_measure"):
    with heavy.turn(f"budget measurement of {cfg.name}", est.high_s, compute.params(cfg).total) as go:
        if go:
            with st.status(f"Measuring… (estimated {est.text})", expanded=True) as status:
                result = budget_measure.measure_budgets(cfg, batch, seq, infer_dtype, attention, dev, st.write)
                refused = [why for why in (result.skipped, result.refused) if why]
                status.update(label=f"Measured {len(result.measured)} quantities"
                              + (", the rest refused" if refused else ""),
                              state="complete" if result.measured else "error", expanded=False)
    if go:
        for why in refused:     # outside the status box: a refusal is never shown as a completed measurement
            st.warning(md(why), icon=":material/block:")
        st.dataframe(tables.measurements_table(result.rows()), hide_index=True, width="stretch")
