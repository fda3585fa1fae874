"""Deploy: will this config fit on N GPUs of a kind (per-GPU memory by component), the smallest layout that
fits, and what training and serving will take. The settings live in the URL, so a link reproduces the plan."""
from dataclasses import asdict

import streamlit as st

from app import deploy_view as view
from app import export, present
from app.charts.deploy import per_gpu_figure
from app.state import current_config
from app.widgets import fitted_columns, page_header
from engine.budget.memory import POLICIES, RECOMPUTE
from engine.plan import GPUS, MODES
from engine.plan.finetune import METHODS
from engine.plan.quant import KV_QUANTS, WEIGHT_QUANTS
from engine.units import fmt_bytes

SEEN = "deploy_url_seen"
W = {key: f"dep_{key}" for key in view.URL_KEYS}

cfg = current_config()
page_header(f"Deploy: {cfg.name}", cfg)
url = {k: v for k, v in st.query_params.to_dict().items() if k in view.URL_KEYS}
if st.session_state.get(SEEN) != url:             # a new link (first visit or pasted): load it
    spec, problems = view.spec_from_params(url)
    for p in problems:
        st.warning(f"URL: {p} — ignored; the rest of the link applies.")
    for key, value in asdict(spec).items():
        st.session_state[W[key]] = value
st.caption("Per-GPU memory from the exact tensor shapes: quantized bytes with their scales, LoRA adapters, ZeRO "
           "chunks, Megatron splits and pipeline stages (engine/plan; the sharding arithmetic is held against "
           "PyTorch's FSDP2 and tensor parallelism on 2 processes). Activations and the ZeRO-3 working set are "
           "modelled estimates.")

c = st.columns(6)
c[0].selectbox("GPU", tuple(GPUS), key=W["gpu"])
c[1].number_input("GPUs", 1, 4096, key=W["gpus"])
c[2].number_input("Tensor parallel (tp)", 1, 64, key=W["tp"], help="Splits heads and FFN columns; divides them.")
c[3].number_input("Pipeline stages (pp)", 1, 512, key=W["pp"], help="At most n_layers.")
c[4].selectbox("ZeRO stage", (0, 1, 2, 3), key=W["zero"], help="3 = FSDP full sharding.")
c[5].number_input("Expert parallel (ep)", 1, 512, key=W["ep"], help="MoE only: experts split over data ranks.")
c = st.columns(6)
c[0].selectbox("Workload", MODES, key=W["mode"], format_func={"train": "training", "infer": "inference"}.get)
c[1].selectbox("Precision policy", POLICIES, key=W["policy"])
c[2].selectbox("Fine-tuning", METHODS, key=W["finetune"], help="qlora: NF4 + double quantization base + LoRA.")
c[3].number_input("LoRA rank", 1, 4096, key=W["lora_rank"], help="Targets q and v (peft's Llama default).")
c[4].selectbox("Weight quantization", WEIGHT_QUANTS, key=W["quant"],
               help="Block matrices only; embeddings, head, norms, biases and routers stay in the policy's dtype.")
c[5].selectbox("KV-cache quantization", KV_QUANTS, key=W["kv_quant"])
c = st.columns(6)
c[0].selectbox("Activation recompute", RECOMPUTE, key=W["recompute"])
c[1].toggle("Sequence parallel", key=W["sp"])
c[2].number_input("Sequence / context (tokens, 0 = context_length)", 0, 10**7, key=W["seq"])
c[3].number_input("Micro-batch (sequences)", 1, 4096, key=W["micro_batch"])
c[4].number_input("Assumed MFU", 0.01, 1.0, step=0.05, key=W["mfu"])
c[5].number_input("Price per GPU-hour", 0.0, 1000.0, step=0.5, key=W["price"])

spec = view.DeploySpec(**{key: st.session_state[W[key]] for key in view.URL_KEYS})
wanted = view.spec_to_params(spec)
for key in view.URL_KEYS:
    present.set_view_param(key, wanted.get(key))
st.session_state[SEEN] = wanted

try:
    p = view.run(cfg, spec)
except ValueError as e:
    for problem in str(e).split("; "):
        st.error(problem, icon=":material/error:")
    st.stop()

verdict = (f"Fits: {fmt_bytes(p.per_gpu['total'])} of {fmt_bytes(p.memory_bytes)} per GPU, "
           f"{fmt_bytes(p.margin_bytes)} to spare.") if p.fits else (
    f"Does not fit: {fmt_bytes(p.per_gpu['total'])} per GPU needs {fmt_bytes(-p.margin_bytes)} more than the "
    f"{fmt_bytes(p.memory_bytes)} a {spec.gpu} has.")
(st.success if p.fits else st.error)(verdict)
shown = [("Per GPU (worst)", fmt_bytes(p.per_gpu["total"])), ("Margin", fmt_bytes(p.margin_bytes)),
         ("Layout", f"dp {p.layout.dp} × tp {p.layout.tp} × pp {p.layout.pp}"),
         ("Trainable parameters" if spec.mode == "train" else "Decode tokens/s",
          f"{p.trainable:,}" if spec.mode == "train" else f"{p.cost.decode_tokens_per_s:,.1f}")]
for col, (label, value) in zip(fitted_columns([[v for _, v in shown]], "deploy_metrics"), shown):
    col.metric(label, value)
export.chart(per_gpu_figure(p.per_stage, p.memory_bytes, spec.gpu), "deploy_memory", "deploy-memory")
if p.high_precision:
    st.caption("Kept in high precision: " + ", ".join(p.high_precision) + ".")
for note in p.notes:
    st.caption(f"Note: {note}.")

st.subheader("Smallest layout that fits")
if st.button("Search layouts (up to 64 GPUs)", key="dep_search"):
    best = view.smallest(cfg, spec)
    if best is None:
        st.warning(f"Nothing up to 64 × {spec.gpu} fits these settings.")
    else:
        lay = best.layout
        st.info(f"{lay.gpus} × {spec.gpu}: dp {lay.dp}, tp {lay.tp}, pp {lay.pp}, ZeRO-{lay.zero} — "
                f"{fmt_bytes(best.per_gpu['total'])} per GPU, {fmt_bytes(best.margin_bytes)} to spare.")

st.subheader("Time and cost")
c = p.cost
st.markdown(
    f"- Training {c.train_tokens:,} tokens (the Chinchilla point, 20 per parameter) at {c.flops_per_token:,.0f} "
    f"FLOPs per token: **{c.train_seconds / 86400:,.1f} days** on {spec.gpus:,} GPUs at MFU {spec.mfu:g}, "
    f"**{c.train_cost:,.0f}** at {spec.price:g} per GPU-hour.\n"
    f"- Prefill of {spec.micro_batch:,} × {p.setup.seq:,} tokens: **{c.prefill_seconds * 1e3:,.1f} ms**; decode: "
    f"**{c.decode_tokens_per_s:,.1f} tokens/s** (memory-bound: weight and KV bytes ÷ bandwidth).")
with st.expander("Formulas"):
    for k, f in c.formulas.items():
        st.markdown(f"- `{k}`: {f}")
