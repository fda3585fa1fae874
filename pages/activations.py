"""Activations: the FFN nonlinearities with their derivatives, and live statistics of the built model."""
import streamlit as st

from app import compute, export, heavy, url_view
from app.charts import activations as charts
from app.state import current_config
from app.text import md
from app.widgets import page_header
from engine.config import DENSE_FFNS, GATED_FFNS
from engine.measure.stats import CPU_PARAM_LIMIT, StatsRefusal, check_live
from engine.runtime import default_device

LIVE_ESTIMATE_S = 5.0   # what the job queue expects one build and sample to take (seconds)
cfg = current_config()
page_header(f"Activations: {cfg.name}", cfg)

st.header("Activation functions")
st.caption("Values and derivatives of the engine's own activation functions, derivatives by torch autograd. "
           "Gated rows show one unit whose gate and up inputs are equal (g = u = x): act(x)·x. "
           f"This config uses **{cfg.ffn}**.")
# the curve names across the page (beside the range slider, the ninth was cut off at 1280 px), the range below
c1, c2 = st.container(), st.columns([1, 2])[0]
default = [n for n in DENSE_FFNS] + ([cfg.ffn] if cfg.gated else [])
names = url_view.bound("act_names", url_view.choices("curves", DENSE_FFNS + GATED_FFNS), default, c1.pills, "Curves",
                       DENSE_FFNS + GATED_FFNS, selection_mode="multi",
                       help="Click to add or remove a curve. Gated ones (swiglu, geglu, ...) show act(x)·x.")
lo, hi = url_view.bound("act_range", url_view.interval("range", -10.0, 10.0), (-4.0, 4.0), c2.slider,
                        "Input range x", -10.0, 10.0, step=0.5)
if names and hi > lo:
    curves = compute.curves(tuple(names), lo, hi)
    export.chart(charts.values_and_slopes_figure(curves, "Activations and their slopes"), "act_curves", "activations")
else:
    st.info("Pick at least one curve and a non-empty range.")

gate = cfg.ffn if cfg.gated else "swiglu"
with st.expander(f"Gated product {gate}: output over gate and up inputs", expanded=cfg.gated):
    st.caption("In a gated FFN each hidden unit outputs act(g)·u: the activated gate g scales the plain linear "
               "value u, so the sign and size of the output follow u wherever the gate is open.")
    export.chart(charts.gated_surface_figure(compute.surface(gate, -3.0, 3.0)), "act_surface", f"{gate}-surface")

st.header("Live statistics of the built model")
device = default_device()
st.caption(f"Builds this config on **{device}** in fp32 with seeded initial weights (untrained), runs one "
           "sequence of random token ids through the explicit attention path and records the residual stream "
           "and every attention probability. Measured, not estimated. On CPU the limit is "
           f"{CPU_PARAM_LIMIT:,} parameters.")
top = min(256, cfg.context_length)
tokens = url_view.bound("stats_tokens", url_view.integer("tokens", 4, top), min(64, top), st.slider,
                        "Sample length (tokens)", 4, top) if cfg.context_length > 4 else cfg.context_length
key = (cfg, tokens, device)
try:
    check_live(cfg, device, tokens)
except StatsRefusal as e:
    st.error(md(e), icon=":material/block:")
else:
    stats = None
    if st.button("Build and measure", type="primary"):
        with heavy.turn(f"live statistics of {cfg.name}", LIVE_ESTIMATE_S, compute.params(cfg).total) as go:
            if go:
                with st.status(f"Building {md(cfg.name)} on {device} and running {tokens} tokens…") as status:
                    stats = compute.live_stats(cfg, tokens, device)
                    status.update(label=f"Measured on {stats.device}: {stats.tokens} tokens", state="complete")
                st.session_state["stats_key"] = key
    elif st.session_state.get("stats_key") == key:    # measured before in this session: from the cache
        stats = compute.live_stats(cfg, tokens, device)
    if stats is not None:
        a, b = st.columns(2)
        with a:
            export.chart(charts.residual_rms_figure(stats.residual_rms), "stats_rms", f"{cfg.name}-residual-rms")
        with b:
            export.chart(charts.entropy_figure(stats.entropy, stats.uniform_entropy, stats.tokens), "stats_entropy",
                         f"{cfg.name}-attention-entropy")
        st.caption("Entropy in nats: 0 means a head attends to a single key; the uniform value (hover) means it "
                   "spreads evenly over all visible keys, as untrained heads do.")
        l, h = st.columns(2)
        layer = l.number_input("Layer", 0, cfg.n_layers - 1, 0, key="map_layer")
        head = h.number_input("Head", 0, cfg.n_heads - 1, 0, key="map_head")
        export.chart(charts.attention_map_figure(stats.probs[layer, head].tolist(), layer, head), "stats_map",
                     f"{cfg.name}-attention-L{layer}-H{head}")
