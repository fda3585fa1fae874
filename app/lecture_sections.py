"""The Lecture page's sections: one function per worked example (inputs, engine call, numbers, chart, captions).

Every number comes from engine.lecture; captions are short enough to read aloud. SECTIONS fixes the order
(and the `section` ids used in the URL).
"""
from __future__ import annotations

from typing import Callable

import streamlit as st

from app import export, widgets
from app import lecture_mla, lecture_state, lecture_sweeps
from app.charts import lecture as charts
from app.diagram import block_dot
from app.lecture_kit import chart, metrics, numbers, nums, vector
from app.state import current_config
from engine import lecture
from engine.units import fmt_bytes, fmt_count


def activations() -> None:
    c1, c2 = st.columns(2)
    z = c1.slider("z for ReLU and GELU", -4.0, 4.0, -1.0, 0.05, key="lec_act_z")
    z2 = c2.slider("z for SiLU", -4.0, 4.0, 2.0, 0.05, key="lec_act_z2")
    a, b = lecture.activation_values(z), lecture.activation_values(z2)
    metrics((f"ReLU({z:g})", f"{a['relu']:.6f}"),
             (f"GELU({z:g})", f"{a['gelu']:.6f}", "Exact GELU: z·Φ(z), Φ the normal CDF."),
             (f"GELU-tanh({z:g})", f"{a['gelu_tanh']:.6f}", "The tanh approximation (GPT-2)."),
             (f"SiLU({z2:g})", f"{b['silu']:.4f}"),
             (f"sigmoid({z2:g})", f"{b['sigmoid']:.4f}", "SiLU(z) = z · sigmoid(z)."))
    st.caption("ReLU zeroes every negative input; GELU lets a small negative value through. Run it twice: the "
               "same input gives the same output, nothing is sampled. SiLU can exceed 1, so a SiLU gate scales "
               "its partner, it is not a probability.")
    chart(charts.marked_activations_figure(lecture.dense_activation_table(), (z, z2)), "activations")


def gating() -> None:
    c1, c2, c3 = st.columns(3)
    d = c1.number_input("d_model", 1, 65536, 768, key="lec_gate_d")
    f = c2.number_input("dense d_ff", 1, 262144, 4 * d, key=f"lec_gate_f_{d}", help="Starts at 4 x d_model.")
    m = c3.selectbox("round gated width up to a multiple of", (1, 8, 64, 128, 256), index=4, key="lec_gate_m")
    g = lecture.gating_match(d, f, m)
    metrics((f"dense, d_ff {g.dense_width:,}", fmt_count(g.dense_params), "2 · d_model · d_ff"),
             (f"gated, d_ff {g.gated_width:,}", fmt_count(g.gated_params), "3 · d_model · d_ff_gated",
              f"{g.gated_gap:+.2%} vs dense"),
             (f"gated, d_ff {g.dense_width:,}", fmt_count(g.same_width_gated_params), "3 · d_model · d_ff",
              f"{g.same_width_extra:+.0%} vs dense"),
             ("dense biases (d_ff + d_model)", fmt_count(g.dense_bias_params)))
    st.caption(f"Three matrices instead of two: to spend the same parameters, the gated width is 2/3 of the dense "
               f"one, here {g.exact_gated_width:,.2f}, rounded up to {g.gated_width:,}. Keep the dense width and the "
               "gated FFN simply has half again as many parameters: a fair comparison matches the budget first.")
    chart(charts.gating_figure(g), "gating")


def parallel() -> None:
    c1, c2 = st.columns([3, 1])
    x = vector(c1, "x", "1, 2, 3, 4", "lec_par_x")
    eps = c2.selectbox("LayerNorm eps", (1e-6, 1e-5, 1e-3), key="lec_par_eps", format_func=lambda e: f"{e:g}")
    r = lecture.serial_vs_parallel(x, eps)
    st.markdown(export.markdown_table(
        ["", "value"], [["LN(x)", nums(r.normed_x)], ["A(LN(x)) = [first coordinate, 0, ...]", nums(r.attention_out)],
                        ["serial: FFN input", nums(r.serial.ffn_input)], ["serial: y", nums(r.serial.output)],
                        ["parallel: FFN input", nums(r.parallel.ffn_input)], ["parallel: y", nums(r.parallel.output)]]))
    metrics(*((f"{name}: FFN reads this block's attention", "yes" if out.ffn_sees_attention else "no")
               for name, out in (("serial", r.serial), ("parallel", r.parallel))))
    st.caption("Toy branches in the engine's own block: attention keeps the first coordinate, the FFN is the "
               "identity, norms have no gain. Serial: the FFN reads x plus the attention update. Parallel: both "
               "branches read the same normalized x, so the attention-to-FFN edge inside the block is gone, and "
               "the output changes.")
    chart(charts.serial_parallel_figure(r), "parallel")
    cfg = current_config().replace(norm_placement="pre")
    widgets.diagram_row({f"{layout} block (current config)": block_dot(
        cfg.replace(block=layout, parallel_shared_norm=True), whole=False) for layout in ("serial", "parallel")})


def tying() -> None:
    v, d = numbers(st.columns(2), ("vocabulary V", 1, 1000, 5, "lec_tie_v"), ("width D", 1, 1000, 3, "lec_tie_d"))
    r = lecture.shared_vs_clone(v, d)
    metrics(("shared Parameter: unique params", fmt_count(r["shared"].unique_params)),
             ("detached clone: unique params", fmt_count(r["clone"].unique_params)),
             ("shared: max |E − W| after one step", f"{r['shared'].max_diff_after:.4f}"),
             ("clone: max |E − W| after one step", f"{r['clone'].max_diff_after:.4f}"))
    st.caption("Tying assigns one Parameter to both places. A detached clone starts with equal values but is a "
               "second tensor: the optimizer moves the two apart on the first step.")
    h = lecture.handout_tying()
    built = lambda k: f"Closed form; the meta-built model has {h[k]['built']:,}."  # noqa: E731
    metrics(("handout nanoGPT config, tied", fmt_count(h["tied"]["closed_form"]), built("tied")),
             ("same config, untied", fmt_count(h["untied"]["closed_form"]), built("untied"),
              f"+{h['untied']['closed_form'] - h['tied']['closed_form']:,}"))
    st.markdown("**What tying saves** at a real vocabulary")
    c = st.columns(3)
    sv, sd = numbers(c, ("V", 1, 10_000_000, 32000, "lec_tie_sv"), ("D", 1, 65536, 768, "lec_tie_sd"))
    dt = c[2].selectbox("weight dtype", ("bf16", "fp16", "fp32"), key="lec_tie_dt")
    s = lecture.tying_savings(sv, sd, dt)
    metrics(("parameters saved (V·D)", fmt_count(s.params)), (f"{dt} weights", fmt_bytes(s.weight_bytes, digits=3)),
             (f"training at {s.bytes_per_param_training} B/param", fmt_bytes(s.training_bytes, digits=3),
              "weight + gradient in the weight dtype, two fp32 Adam moments"),
             ("+ fp32 master copy", fmt_bytes(s.master_bytes, digits=3)))
    st.caption("The logits still span the whole vocabulary: tying saves a matrix, not the output projection's work.")


def gradient() -> None:
    c1, c2, c3 = st.columns([2, 1, 1])
    tokens = c1.multiselect("input tokens", list(range(5)), [0, 2], key="lec_grad_tokens")
    target = c2.selectbox("target token", list(range(5)), index=1, key="lec_grad_target")
    tied = c3.toggle("tied", True, key="lec_grad_tied")
    if not tokens:
        raise ValueError("input tokens: choose at least one token")
    r = lecture.absent_token_gradient(tuple(tokens), target, tied)
    rows = []
    for j, p in enumerate(r.probs):
        g = sum(x * x for x in r.head_grad[j]) ** 0.5
        ph = p * sum(x * x for x in r.hidden) ** 0.5 if j in r.absent else None
        rows.append([f"{j}", charts.token_role(r, j), f"{p:.4f}", f"{g:.4f}", "" if ph is None else f"{ph:.4f}"])
    st.markdown(export.markdown_table(["token", "role", "p_j", "|grad of output row j|", "|p_j · h|"], rows))
    metrics(("absent rows: max |grad − p_j·h|", f"{r.max_error:.1e}"),
             ("absent token's embedding row: max |grad|", f"{r.embedding_absent_grad:.4f}",
              "Non-zero only when tied: then the output row is the embedding row."))
    st.caption("One prediction in the handout's nanoGPT config. A token that is neither input nor target still "
               "gets a gradient on its output row, exactly p_j times the hidden state: it learns as a wrong "
               "alternative. Tied, that row is its embedding.")
    chart(charts.absent_gradient_figure(r), "gradient")


def norms() -> None:
    c1, c2 = st.columns([3, 1])
    x = vector(c1, "x", "3, 4", "lec_norm_x")
    eps = c2.number_input("eps", 0.0, 1.0, 0.0, format="%g", key="lec_norm_eps")
    r = lecture.norm_comparison(x, eps)
    metrics(("RMSNorm(x)", nums(r.rmsnorm)), ("LayerNorm(x)", nums(r.layernorm)),
             ("mean after RMSNorm", f"{r.rmsnorm_mean:.4f}"))
    st.caption(f"RMSNorm divides by the root mean square ({r.rms_of_input:.4f}) and keeps the mean; LayerNorm "
               "subtracts the mean first. Same scale control, different functions. No gains here.")
    chart(charts.norm_figure(r), "norms")


def rope() -> None:
    c = st.columns(5)
    theta = c[0].slider("θ per position (degrees)", 1.0, 180.0, 30.0, 1.0, key="lec_rope_theta")
    i1, j1, i2, j2 = numbers(c[1:], *((lbl, 0, 64, dv, f"lec_rope_{lbl}")
                                       for lbl, dv in (("i₁", 0), ("j₁", 1), ("i₂", 2), ("j₂", 3))))
    scores = lecture.rope_scores(theta, ((i1, j1), (i2, j2)))
    metrics(*((f"score at positions ({s.i}, {s.j})", f"{s.score:.4f}", f"relative angle {s.relative_deg:g}°")
               for s in scores))
    st.caption("q = k = (1, 0). Both vectors rotate by their position times θ; the dot product only sees the "
               "angle between them, (j − i)·θ. Shift both positions together and the score stays put.")
    chart(charts.rope_grid_figure(lecture.rope_score_grid(theta, 8), theta), "rope")


def zloss() -> None:
    c1, c2, c3 = st.columns(3)
    base = vector(c1, "logits", "0, 0", "lec_z_logits")
    shift = c2.number_input("add to every logit", -100.0, 100.0, 10.0, key="lec_z_shift")
    coeff = c3.selectbox("z-loss coefficient", (1e-4, 1e-3, 1e-2), key="lec_z_coeff", format_func=lambda v: f"{v:g}")
    a, b = lecture.zloss(base, coeff), lecture.zloss(tuple(v + shift for v in base), coeff)
    metrics(("probabilities", nums(a.probs)), ("probabilities, shifted", nums(b.probs)),
             ("log Z", f"{a.log_z:.4f}", f"z-loss {a.z_loss:.4g}"),
             ("log Z, shifted", f"{b.log_z:.4f}", f"z-loss {b.z_loss:.4g}"))
    st.caption("Adding the same number to every logit leaves softmax unchanged and moves log Z by that number. "
               "Cross-entropy cannot see the drift; the z-loss, coefficient times (log Z) squared, can.")


def softcap() -> None:
    cap = st.slider("cap c", 1.0, 100.0, 30.0, 1.0, key="lec_cap_c")
    chart(charts.softcap_figure(lecture.softcap_curve(cap, -4 * cap, 4 * cap), cap), "softcap")
    c1, c2, c3 = st.columns(3)
    scores = vector(c1, "scores", "2, 1, 3", "lec_cap_scores")
    masked = c2.multiselect("masked keys", list(range(len(scores))), [len(scores) - 1], key="lec_cap_masked")
    mcap = c3.number_input("cap for the mask demo", 0.1, 100.0, 5.0, key="lec_cap_m")
    r = lecture.mask_order(scores, tuple(i in masked for i in range(len(scores))), mcap)
    on_masked = lambda probs: f"{max((p for p, m in zip(probs, r.masked) if m), default=0):.4f}"  # noqa: E731
    metrics(("masked key, cap then mask", on_masked(r.cap_then_mask)),
             ("masked key, mask then cap", on_masked(r.mask_then_cap)),
             ("engine: weight on a future key", f"{r.engine_future_weight:.4f}",
              "A soft-capped model built by the engine: largest attention probability above the diagonal."))
    st.caption("c·tanh(z/c) keeps logits inside (−c, c) and flattens the gradient for large ones. Apply it "
               "before the mask: tanh would turn the mask's −∞ into −c, and the masked key would get weight.")
    chart(charts.mask_order_figure(r), "mask_order")


def kvcache() -> None:
    c = st.columns(5)
    L, T, H, hd = numbers(c, ("layers", 1, 512, 32, "lec_kv_l"), ("tokens", 1, 10_000_000, 8192, "lec_kv_t"),
                           ("query heads", 1, 512, 32, "lec_kv_h"), ("head_dim", 1, 1024, 128, "lec_kv_hd"))
    dt = c[4].selectbox("dtype", ("bf16", "fp16", "fp32"), key="lec_kv_dt")
    variants = lecture.kv_cache_variants(L, T, H, hd, dtype=dt)
    metrics(*((f"{v.kind} ({v.kv_heads} KV head{'' if v.kv_heads == 1 else 's'})", fmt_bytes(v.bytes), f"{v.vs_mha:.2%} of MHA") for v in variants))
    st.caption("2 × layers × tokens × KV heads × head_dim × bytes. Every variant keeps all query heads; only the "
               "keys and values that decoding rereads get shared.")
    chart(charts.kv_by_kind_figure(variants), "kvcache")


HEADS_MAX_PROJECTION = 2**26   # the heads demo builds its model for real: 4·D·A parameters, 256 MiB in fp32 at most


def heads() -> None:
    d, h, hd = numbers(st.columns(3), ("d_model D", 1, 4096, 10, "lec_heads_d"), ("heads H", 1, 128, 3, "lec_heads_h"),
                        ("head_dim d_h", 1, 1024, 4, "lec_heads_hd"))
    if 4 * d * h * hd > HEADS_MAX_PROJECTION:   # the inputs' own maxima would build 2.1 billion parameters
        raise ValueError(f"d_model D, heads H, head_dim d_h: this demo builds the model for real and 4·D·H·d_h = "
                         f"{4 * d * h * hd:,} projection parameters is more than {HEADS_MAX_PROJECTION:,}; "
                         "lower one of them")
    r = lecture.flexible_heads(d, h, hd)
    shape = lambda dims: " × ".join(map(str, dims))  # noqa: E731
    metrics(("attention width A = H·d_h", fmt_count(r.attn_width)), ("D mod H", f"{r.d_model % r.n_heads}"),
             ("q_proj weight", shape(r.q_proj_shape)), ("o_proj weight", shape(r.o_proj_shape)),
             ("logits", shape(r.logits_shape), "finite" if r.finite else "not finite"))
    st.caption(f"The engine builds and runs this model. The rule is A = H·d_h, not D = H·d_h: q, k, v map D to A "
               f"and o_proj maps A back to D. Projections cost 4·D·A = {r.projection_params:,} instead of 4·D² = "
               f"{r.square_projection_params:,}.")


def depth() -> None:
    L1, D1, L2, D2, T = numbers(st.columns(5), ("L₁", 1, 512, 12, "lec_dw_l1"),
                                 ("D₁", 64, 16384, 768, "lec_dw_d1", 64), ("L₂", 1, 512, 48, "lec_dw_l2"),
                                 ("D₂", 64, 16384, 384, "lec_dw_d2", 64),
                                 ("tokens", 1, 1_000_000, 2048, "lec_dw_t"))
    r = lecture.depth_vs_width((L1, D1), (L2, D2), tokens=T)
    a, b = r.shapes
    metrics(*((f"block params L={s.n_layers}, D={s.d_model}", fmt_count(s.block_params)) for s in (a, b)),
             ("block params ratio", f"{r.block_ratio:g}×"),
             ("KV cache ratio", f"{r.kv_ratio:g}×",
              f"{fmt_bytes(a.kv_cache_bytes)} vs {fmt_bytes(b.kv_cache_bytes)} at {T:,} tokens, bf16"),
             ("sequential depth ratio", f"{r.depth_ratio:g}×"))
    st.caption("Blocks hold about 12·L·D² parameters, so these shapes have the same block budget. The cache grows "
               "with L·D and a token must pass through every block in turn: equal parameters, unequal costs.")
    chart(charts.depth_figure(r), "depth")


def microgpt() -> None:
    v, d, t, n = numbers(st.columns(4), ("vocab", 1, 100000, 28, "lec_mg_v"), ("n_embd", 4, 4096, 16, "lec_mg_d", 4),
                          ("block_size", 1, 4096, 16, "lec_mg_t"), ("n_layer", 1, 64, 1, "lec_mg_l"))
    tab = lecture.microgpt_table(vocab_size=v, d_model=d, n_layers=n, context_length=t)
    st.markdown(export.markdown_table(["matrix", "shape", "parameters"],
                                      [[r.name, r.shape, fmt_count(r.count)] for r in tab.rows]))
    metrics(("by hand", fmt_count(tab.hand_total)), ("engine closed form", fmt_count(tab.engine_total)),
             ("engine, built model", fmt_count(tab.built_total)))
    st.caption("The chapter's table, rebuilt from the sizes. microgpt's norms have no gains and its layers no "
               "biases, so these matrices are all there is; the engine's count agrees.")
    chart(charts.microgpt_figure(tab), "microgpt")


def moe() -> None:
    preset = st.selectbox("MoE preset", ("mixtral-8x7b", "qwen3-30b-a3b", "olmoe-1b-7b", "qwen1.5-moe-a2.7b"),
                          key="lec_moe_preset")
    r = lecture.store_vs_compute(preset)
    metrics(("stored parameters", fmt_count(r.total), "Every expert of every layer: what memory must hold."),
             ("used per token", fmt_count(r.active), "Embedding, head, attention, norms, router, shared experts "
              f"and {r.per_token} of {r.experts} routed experts."),
             ("bf16 weights", fmt_bytes(r.weights_bf16), f"a dense model of the active size: {fmt_bytes(r.active_bf16)}"),
             ("forward FLOPs / token", f"{r.forward_flops_per_token:,}",
              f"all experts computed: {r.dense_equivalent_flops:,}"))
    st.caption(f"The router sends each token to {r.per_token} of {r.experts} experts, so a token computes with "
               f"{r.active / r.total:.0%} of the weights, yet any token may pick any expert, so all of them must sit "
               f"in memory ({r.routed_share:.0%} of the parameters are routed experts). Size memory from the "
               "total, compute from the active count.")
    chart(charts.store_vs_compute_figure(r), "moe")


SECTIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "activations": ("GELU, ReLU and SiLU", activations),
    "gating": ("Parameter-matched gating", gating),
    "parallel": ("Serial vs parallel block", parallel),
    "tying": ("Tying: one Parameter, two roles", tying),
    "gradient": ("Tying: an absent token still learns", gradient),
    "norms": ("RMSNorm vs LayerNorm", norms),
    "rope": ("RoPE: scores depend on the offset", rope),
    "zloss": ("z-loss: same probabilities, different log Z", zloss),
    "softcap": ("Soft-capping, then the mask", softcap),
    "kvcache": ("KV cache: MHA, GQA, MQA", kvcache),
    "mla": ("MLA: cache the latent, not the heads", lecture_mla.render),
    "state": ("A fixed state instead of a growing cache", lecture_state.render),
    "moe": ("Mixture of experts: you store every expert, you compute k", moe),
    "sweeps": ("Trade-off sweeps, one click each", lecture_sweeps.render),
    "heads": ("Heads need not divide the width", heads),
    "depth": ("Depth vs width at equal block parameters", depth),
    "microgpt": ("microgpt by hand", microgpt),
}
