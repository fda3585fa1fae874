"""Design: the exact parameter count, where the parameters live, and the block diagram of the current config."""
import streamlit as st

from app import compute, export, tables
from app.charts import design as charts
from app.diagram import block_dot
from app.state import current_config, current_preset
from app import widgets
from app.widgets import page_header
from engine.layers.layer_map import layer_map
from engine.layers.position import rope_frequency_profile, rope_scaling_text
from engine.presets import PRESETS
from engine.units import fmt_count

SIDE_DIAGRAM_PX = 512   # natural width that keeps 12-point text >= 10 px in the 320 px side column at 1280

cfg = current_config()
pc = compute.params(cfg)
page_header(f"Design: {cfg.name}", cfg)

preset = PRESETS[current_preset()]
if cfg == preset.config:
    check = "matches" if pc.total == preset.reference_params else "differs from"
    st.caption(f"Exact count from the closed form in engine/budget/params.py; it {check} the reference "
               f"{fmt_count(preset.reference_params)} ({preset.source}).")
else:
    st.caption("Exact count from the closed form in engine/budget/params.py (equal to the built model's "
               "parameters(); a tied matrix counts once).")
verb = "saves" if pc.tied else "would save"
st.markdown(f"**{fmt_count(pc.total)}** parameters in total, **{fmt_count(pc.non_embedding)}** outside the "
            f"embeddings. Tying the output head to the token embedding {verb} **{fmt_count(pc.tying_saves)}** "
            f"parameters (vocab_size × d_model); one block holds **{fmt_count(pc.per_layer)}**.")

lmap = layer_map(cfg)
if lmap.kinds > 1:
    st.subheader("Layer map")
    export.shared_chart(charts.layer_map_chart, cfg, key="design_layer_map", name=f"{cfg.name}-layer-map")
    st.caption("Each layer's token mixer (top) and FFN (bottom), read from layer_types and ffn_types: "
               + "; ".join(f"{k.label} in layers {k.ranges} ({len(k.layers):,})" for k in lmap.mixers + lmap.ffns)
               + ".")

# Beside the table only while the diagram is narrow enough to keep its text readable there (2/5 of the page:
# 320 px at 1280 with the sidebar open); a wider one (MLA, most MoE) goes below, at its own size.
beside = (widgets.diagram_width(block_dot(cfg)) or 0) <= SIDE_DIAGRAM_PX
left, right = st.columns([3, 2]) if beside else (st.container(), st.container())
with left:
    export.shared_chart(charts.params_treemap, pc, key="design_params", name=f"{cfg.name}-parameters")
    # below the fold and the page's only table: its grid component loads when the reader opens it
    table = st.expander("Every component: exact count and share", key="design_table", on_change="rerun")
    if table.open:
        with table:
            widgets.shared_dataframe(tables.params_table, pc)
with right:
    st.subheader("Block diagram")
    st.caption("Drawn from the config: it changes with serial/parallel blocks, norm placement, gated FFNs, "
               "mixtures of experts, GQA/MQA, MLA (latent projections and what the cache holds), QK-norm, RoPE, "
               "windows and soft-caps.")
    widgets.config_diagram(cfg, natural=not beside)

if cfg.position == "rope":
    st.subheader("RoPE rotation frequencies")
    tokens = cfg.context_length
    st.caption(f"Each pair of rotating dimensions turns by a fixed angle per token. {rope_scaling_text(cfg, tokens)}")
    original, scaled = rope_frequency_profile(cfg, tokens)
    export.chart(charts.rope_frequency_chart(original, scaled, cfg.rope_scaling, tokens), "design_rope",
                 f"{cfg.name}-rope-frequencies")
