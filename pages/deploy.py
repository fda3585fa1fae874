"""Deploy: will this config fit on N GPUs of a kind (per-GPU memory by component), the smallest layout that
fits, what training will take, and what an inference engine makes of it (longest context, concurrent requests,
tokens/s). The settings live in the URL, so a link reproduces the plan."""
from dataclasses import asdict

import streamlit as st

from app import deploy_view as view
from app import export, present
from app.charts.deploy import serving_context_figure, per_gpu_figure, serving_speed_figure
from app.state import current_config
from app.widgets import fitted_columns, page_header
from engine.budget.memory import POLICIES, RECOMPUTE
from engine.plan import GPUS, MODES, shipped_notes
from engine.plan.finetune import METHODS
from engine.plan.quant import KV_QUANTS, WEIGHT_QUANTS
from engine.units import fmt_bytes

SEEN, SPEC = "deploy_url_seen", "deploy_spec"
W = {key: f"dep_{key}" for key in view.URL_KEYS}
ss = st.session_state

cfg = current_config()
page_header(f"Deploy: {cfg.name}", cfg)
url = {k: v for k, v in st.query_params.to_dict().items() if k in view.URL_KEYS}
if ss.get(SEEN) != url:                         # a new link (first visit or pasted): load it
    spec, problems = view.spec_from_params(url)
    for p in problems:
        st.warning(f"URL: {p} — ignored; the rest of the link applies.")
    for key, value in asdict(spec).items():
        ss[W[key]] = value
    ss[SPEC] = spec
for key, value in asdict(ss.get(SPEC, view.DeploySpec())).items():
    ss.setdefault(W[key], value)                # a control hidden in the other mode keeps its value
if ss[W["mode"]] == "train" and ss[W["finetune"]] == "qlora" and ss[W["quant"]] == "none":
    ss[W["quant"]] = view.QLORA_QUANT           # the control shows the 4-bit storage QLoRA applies
st.caption("Per-GPU memory from the exact tensor shapes: quantized bytes with their scales (GGUF types as "
           "llama.cpp's quantizer mixes them, checkpoints as published), LoRA adapters, ZeRO chunks, Megatron "
           "splits and pipeline stages (engine/plan). Activations, engine overheads and speed are stated "
           "estimates.")

train = ss[W["mode"]] == "train"
c = st.columns(6)
c[0].selectbox("GPU", tuple(GPUS), key=W["gpu"])
c[1].number_input("GPUs", 1, 4096, key=W["gpus"])
c[2].number_input("Tensor parallel (tp)", 1, 64, key=W["tp"], help="Splits heads and FFN columns; divides them.")
c[3].number_input("Pipeline stages (pp)", 1, 512, key=W["pp"], help="At most n_layers.")
c[4].number_input("Expert parallel (ep)", 1, 512, key=W["ep"], help="MoE only: experts split over data ranks.")
c[5].selectbox("Workload", MODES, key=W["mode"], format_func={"train": "training", "infer": "inference"}.get)
quant_help = ("How the weights are stored: a scheme for the block matrices (embeddings, head, norms stay in the "
              "policy's dtype), checkpoint (as the published files store it) or a llama.cpp GGUF file type.")
c = st.columns(6)
c[0].selectbox("Precision policy", POLICIES, key=W["policy"])
if train:
    c[1].selectbox("Fine-tuning", METHODS, key=W["finetune"], help="qlora: LoRA on a 4-bit base (NF4 with "
                   "double quantization unless another storage is chosen).")
    c[2].number_input("LoRA rank", 1, 4096, key=W["lora_rank"], help="Targets q and v (peft's Llama default).",
                      disabled=ss[W["finetune"]] == "full")
    c[3].selectbox("Weight quantization", WEIGHT_QUANTS, key=W["quant"], help=quant_help)
    c[4].selectbox("ZeRO stage", (0, 1, 2, 3), key=W["zero"], help="3 = FSDP full sharding.")
    c[5].selectbox("Activation recompute", RECOMPUTE, key=W["recompute"])
    c = st.columns(7)
    c[0].toggle("Seq. parallel", key=W["sp"], help="Sequence parallelism: the norm activations split across tp "
                "ranks too.")
    c[1].number_input("Sequence (tokens, 0 = context_length)", 0, 10**7, key=W["seq"])
    c[2].number_input("Micro-batch (sequences)", 1, 4096, key=W["micro_batch"])
    c[3].number_input("Training tokens (0 = default)", 0, 10**15, key=W["tokens"], step=10**8,
                      help="0: Chinchilla's 20 per parameter for full (pre-)training; a fine-tune needs its own "
                           "budget (the tokens of its data times epochs).")
    c[4].number_input("Assumed MFU", 0.01, 1.0, step=0.05, key=W["mfu"])
    c[5].number_input("Price per GPU-hour", 0.0, 1000.0, step=0.5, key=W["price"])
    c[6].text_input("Currency", key=W["currency"], max_chars=12)
else:
    c[1].selectbox("Weight quantization", WEIGHT_QUANTS, key=W["quant"], help=quant_help)
    c[2].selectbox("KV-cache quantization", KV_QUANTS, key=W["kv_quant"],
                   help="f16 / q8_0 / q4_0 ... are llama.cpp's --cache-type-k/-v.")
    c[3].selectbox("Engine", view.CHOICES["engine"], key=W["engine"],
                   help="auto: llama.cpp for GGUF weights, vLLM otherwise.")
    c[4].number_input("Context (tokens, 0 = context_length)", 0, 10**7, key=W["seq"])
    c[5].number_input("Concurrent sequences (batch)", 1, 4096, key=W["micro_batch"])
    c = st.columns(6)
    c[0].number_input("Requests of N tokens (0 = context_length)", 0, 10**7, key=W["request"])
    c[1].number_input("Bandwidth efficiency (decode)", 0.05, 1.0, step=0.05, key=W["efficiency"],
                      help="Share of the datasheet bandwidth decode reaches (0.75: a measured Llama-3.1-8B "
                           "batch-1 decode on an A100 reached ~77%).")
    c[2].number_input("Compute efficiency (prefill)", 0.05, 1.0, step=0.05, key=W["compute_eff"])
    c[3].number_input("Price per GPU-hour", 0.0, 1000.0, step=0.5, key=W["price"])
    c[4].text_input("Currency", key=W["currency"], max_chars=12)
    with c[5].popover("Assumptions"):
        st.number_input("Memory share (0 = engine default: vLLM 0.9, llama.cpp 1.0)", 0.0, 1.0, step=0.05,
                        key=W["utilization"])
        st.number_input("Activation peak / compute buffer, GiB (-1 = modelled)", -1.0, 1e4, step=0.25,
                        key=W["activation_gib"], help="vLLM measures it in its profile run; read it off your log.")
        st.number_input("Non-torch memory, GiB (vLLM)", 0.0, 1e3, step=0.25, key=W["non_torch_gib"])

spec = view.DeploySpec(**{key: ss[W[key]] for key in view.URL_KEYS})
ss[SPEC] = spec
wanted = view.spec_to_params(spec)
for key in view.URL_KEYS:
    present.set_view_param(key, wanted.get(key))
ss[SEEN] = wanted

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
if train:
    shown = [("Per GPU (worst)", fmt_bytes(p.per_gpu["total"]), None), ("Margin", fmt_bytes(p.margin_bytes), None),
             ("Layout", f"dp {p.layout.dp} × tp {p.layout.tp} × pp {p.layout.pp}", None),
             ("Trainable parameters", f"{p.trainable:,}", None)]
else:
    cap, sp = p.capacity, p.speed
    room = cap.blocks > 0
    shown = [("Per GPU (worst)", fmt_bytes(p.per_gpu["total"]), "Weights, KV cache of the batch and logits."),
             ("Longest context", f"{cap.max_context:,} tokens" if room else "no room",
              "One sequence, as the engine sizes its KV pool (the model's context_length at most)."),
             ("Requests at once", f"{cap.max_concurrency:.2f}×", f"How many requests of {cap.request_tokens:,} "
              "tokens the KV pool holds at once (vLLM's 'Maximum concurrency')."),
             ("Tokens/s per user", f"{sp.per_user:,.1f}", f"Decode at batch {sp.batch:,} and {sp.context:,} tokens "
              "of context.")]
for col, (label, value, why) in zip(fitted_columns([[v for _, v, _ in shown]], "deploy_metrics"), shown):
    col.metric(label, value, help=why)
shipped = shipped_notes(cfg, p.setup) if p.setup.quant != "checkpoint" else []
for note in shipped:                            # the model ships quantized: name the format, offer it
    st.info(note, icon=":material/inventory_2:")
    st.button("Size it as published", key="dep_published", on_click=lambda: ss.__setitem__(W["quant"], "checkpoint"))
export.chart(per_gpu_figure(p.per_stage, p.memory_bytes, GPUS[spec.gpu]), "deploy_memory", "deploy-memory")
st.caption("Weights stored as " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in p.weights_by_storage.items()) + "."
           + (" Kept in high precision: " + ", ".join(p.high_precision) + "." if p.high_precision else ""))
for note in (n for n in p.notes if n not in shipped and not n.startswith("training time and cost")):
    st.caption(f"Note: {note}.")

if train:
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
    if c.train_tokens is None:
        st.info("Give a token budget: a fine-tune has no compute-optimal default (Chinchilla's 20 tokens per "
                "parameter is a pre-training rule).")
    else:
        how = ("the Chinchilla point, 20 per parameter" if c.token_budget == "chinchilla" else "your budget")
        st.markdown(f"Training {c.train_tokens:,} tokens ({how}) at {c.flops_per_token:,.0f} FLOPs per token: "
                    f"**{c.train_seconds / 86400:,.1f} days** on {spec.gpus:,} GPUs at MFU {spec.mfu:g}, "
                    f"**{c.train_cost:,.0f} {c.currency}** at {spec.price:g} {c.currency} per GPU-hour.")
    formulas = c.formulas
else:
    st.subheader("Serving")
    a, unit = cap.assumptions, ("blocks of " + str(cap.assumptions["block_size"]) if cap.engine == "vllm" else "cells")
    limit = "memory-bound" if cap.context_limit == "memory" else "the model’s context_length"
    pool = (f"a KV pool of **{cap.kv_tokens:,} tokens** ({cap.blocks:,} {unit}, {fmt_bytes(cap.available_bytes)}). "
            f"Longest context **{cap.max_context:,}** ({limit}); **{cap.max_concurrency:.2f}** concurrent requests "
            f"of {cap.request_tokens:,} tokens." if room else
            f"**no room for a KV cache**: weights and overheads exceed that share by "
            f"{fmt_bytes(-cap.available_bytes)}.")
    moe = (f"; an MoE step reads {sp.experts_read:.1f} of {cfg.n_experts} experts per layer at this batch, not all"
           if sp.experts_read is not None else "")
    st.markdown(f"**{cap.engine}** with {a['utilization']:.0%} of each GPU: {pool} Decode at batch {sp.batch:,}: "
                f"**{sp.per_user:,.1f} tokens/s** each, {sp.total:,.1f} in all ({sp.bound}-bound{moe}); prefill "
                f"{sp.prefill_seconds * 1e3:,.1f} ms; **{p.cost_per_million:,.2f} {p.currency}** per million "
                f"generated tokens.")
    export.chart(serving_context_figure(*view.context_curve(cfg, spec), view.GPUS[spec.gpu]), "deploy_context",
                 "deploy-context")
    batches, per_user, total, fit = view.speed_curve(cfg, spec)
    export.chart(serving_speed_figure(batches, per_user, total, fit, p.setup.seq), "deploy_speed", "deploy-speed")
    formulas = {**cap.formulas, **sp.formulas}
with st.expander("Formulas"):
    for k, f in formulas.items():
        st.markdown(f"- `{k}`: {f}")
