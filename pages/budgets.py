"""Budgets: memory per precision policy, KV cache vs context, FLOPs split, roofline, and estimate vs measurement."""
import streamlit as st

from app import budget_charts, budget_view, compute, export, tables
from app.state import current_config
from app.text import md
from app.widgets import metric_row
from engine.budget.activations import ATTENTION_IMPLS
from engine.budget.devices import DEVICE_PROFILES
from engine.budget.memory import DTYPE_BYTES, OPTIMIZERS, POLICIES, RECOMPUTE, pure_policy
from engine.guard import MemoryRefusal
from engine.measure.stats import StatsRefusal, check_live
from engine.measure.suite import measure_config
from engine.runtime import default_device
from engine.units import fmt_bytes, fmt_flops

cfg = current_config()
st.title(f"Budgets: {md(cfg.name)}")
metric_row(cfg)

c = st.columns(6)
batch = c[0].number_input("Batch (sequences)", 1, 4096, 1, key="b_batch")
seq = c[1].number_input("Sequence (tokens)", 1, cfg.context_length, min(cfg.context_length, 2048), key="b_seq",
                        help=f"At most context_length = {cfg.context_length:,}.")
optimizer = c[2].selectbox("Optimizer", OPTIMIZERS, key="b_opt")
recompute = c[3].selectbox("Recompute", RECOMPUTE, key="b_recompute",
                           help="Activation checkpointing: selective drops the attention scores, full keeps only "
                                "each block's input.")
attention = c[4].selectbox("Attention kernel", ATTENTION_IMPLS, key="b_attn",
                           help="sdpa (fused) saves no T x T scores; explicit saves them, as the plots need.")
infer_dtype = c[5].selectbox("Inference dtype", list(DTYPE_BYTES), index=1, key="b_dtype")

st.header("Memory")
train = {p: compute.memory(cfg, batch, seq, budget_view.POLICY_DTYPE[p], p, optimizer, recompute, attention)
         for p in POLICIES}
infer = compute.memory(cfg, batch, seq, infer_dtype, pure_policy(infer_dtype), optimizer, recompute, attention)
export.chart(budget_charts.memory_figure(train, infer, f"inference ({infer_dtype})"), "b_memory", f"{cfg.name}-memory")
st.caption("Closed forms from engine/budget/memory.py; activations are what autograd saves for one forward + "
           "loss at this batch and sequence (engine/budget/activations.py); the inference bar holds the weights "
           "and a KV cache of the whole sequence.")
with st.expander("Formulas (mixed-bf16)"):
    mixed = train["mixed-bf16"]
    st.dataframe(tables.formulas_table(mixed, tuple(mixed.formulas), fmt_bytes), hide_index=True, width="stretch")

st.header("KV cache vs context length")
variants = budget_view.kv_variants(cfg)
grid = budget_view.token_grid(cfg.context_length)
series = {label: compute.kv_curve(v, batch, grid, infer_dtype) for label, v in variants.items()}
export.chart(budget_charts.kv_figure(list(grid), series, next(iter(variants))), "b_kv", f"{cfg.name}-kv-cache")
st.caption(f"Closed form: 2 x layers x tokens x kv_heads x head_dim x {DTYPE_BYTES[infer_dtype]} bytes at batch "
           f"{batch}; a window layer holds at most its window. Fewer key/value heads (GQA, MQA) shrink it "
           "proportionally; a window caps it.")

st.header("FLOPs")
causal = st.toggle("Count only the causal half of attention", key="b_causal",
                   help="Off: the full T x T square, as FlopCounterMode and the 12·L·H·Q·T rule count it.")
fb = compute.flops(cfg, batch, seq, causal)
a, b = st.columns(2)
with a:
    export.chart(budget_charts.flops_figure(fb), "b_flops", f"{cfg.name}-flops")
with b:
    export.chart(budget_charts.flops_rules_figure(fb), "b_flops_rules", f"{cfg.name}-flops-rules")
st.caption("Closed form from engine/budget/flops.py: a multiply-add is 2 FLOPs, only matrix products count; "
           "backward is twice forward.")

st.header("Roofline")
r1, r2 = st.columns([1, 3])
device = r1.selectbox("Device", list(DEVICE_PROFILES), key="b_device")
r1.caption(DEVICE_PROFILES[device].source)
points = compute.rooflines(cfg, device, batch, seq, infer_dtype)
for p in points.values():
    r1.markdown(f"- {p.verdict}")
with r2:
    export.chart(budget_charts.roofline_figure(DEVICE_PROFILES[device], points, infer_dtype), "b_roofline",
                 f"{cfg.name}-roofline")

st.header("Estimate vs measurement")
dev = default_device()
m_seq = budget_view.measure_seq(seq)
st.caption(f"Builds the model for real on **{dev}** at batch 1, sequence {m_seq} in {infer_dtype} and compares: "
           "activation bytes (saved-tensor hooks), KV-cache bytes (KVCache.nbytes after a decode step); FLOPs are "
           f"counted by FlopCounterMode on the meta device (any width, up to {budget_view.MEASURE_MAX_LAYERS:,} "
           "layers).")
if st.button("Measure", type="primary", key="b_measure"):
    with st.status("Measuring…", expanded=True) as status:
        measured = {}
        if cfg.n_layers <= budget_view.MEASURE_MAX_LAYERS:
            try:
                measured = measure_config(cfg, 1, m_seq, infer_dtype, attention, dev, ("flops",), st.write)
            except MemoryRefusal as e:
                st.error(f"Not counting FLOPs on the meta device: {md(e)}")
        else:
            st.warning(f"n_layers: not counting FLOPs on the meta device for {cfg.n_layers:,} layers (at most "
                       f"{budget_view.MEASURE_MAX_LAYERS:,}, each costs tens of ms); the closed form above stands.")
        try:
            check_live(cfg, dev, m_seq)
            measured |= measure_config(cfg, 1, m_seq, infer_dtype, attention, dev, ("activations", "kv_cache"),
                                       st.write)
        except (StatsRefusal, MemoryRefusal) as e:
            st.error(f"Not building a real model: {md(e)}")
        status.update(label=f"Measured {len(measured)} quantities", state="complete")
    rows = [(m, fmt_flops if key.endswith("_flops") else fmt_bytes) for key, m in measured.items()]
    st.dataframe(tables.measurements_table(rows), hide_index=True, width="stretch")
