"""Compare: pin up to four configs (current, presets, uploaded YAML) and see them side by side."""
import streamlit as st

from app import compare_view, export, tables, url_view
from app import pins as pin_codec
from app.charts import compare as charts
from app.editor import read_yaml
from app.present import set_view_param
from app.state import current_config
from app.text import md
from app.widgets import page_header, yaml_uploader
from engine.config import ConfigError
from engine.layers.mixers import MIXERS
from engine.layers.moe import dense_counterpart
from engine.sweep.hold import equal_params_transformer
from engine.presets import PRESETS

PINS, NOTE = "pins", "pin_note"
cfg = current_config()


def pin(label: str, config) -> None:
    st.session_state[NOTE] = compare_view.add_pin(st.session_state[PINS], label, config)


def pin_upload() -> None:
    upload = st.session_state.get("cmp_upload")
    if upload is not None:
        config, problems = read_yaml(upload)
        if config is None:
            st.session_state[NOTE] = "; ".join(problems)
        else:
            pin(f"{config.name} (YAML)", config)


if PINS not in st.session_state:   # the link's pins, else something to compare
    linked, problems = pin_codec.decode_pins(st.query_params.get("pins", ""))
    other = "llama-3-8b" if cfg.name != "llama-3-8b" else "gpt2"
    st.session_state[PINS] = linked[:compare_view.MAX_PINS] or [(f"{cfg.name} (current)", cfg), (other, PRESETS[other].config)]
    st.session_state[NOTE] = "; ".join(problems + ([f"pins: only the first {compare_view.MAX_PINS} are kept"]
                                                   if len(linked) > compare_view.MAX_PINS else []))
pins = st.session_state[PINS]

page_header("Compare", cfg, reference=pins[0][1])
st.caption(f"Current config **{md(cfg.name)}**; deltas against the first pin, **{md(pins[0][0])}**.")

a, b, c = st.columns(3)
a.button("Pin the current config", on_click=pin, args=(f"{cfg.name} (current)", cfg), width="stretch")
preset = b.selectbox("Preset", list(PRESETS), key="cmp_preset", label_visibility="collapsed")
b.button("Pin this preset", on_click=lambda: pin(preset, PRESETS[preset].config), width="stretch")
with c:
    yaml_uploader("Pin a YAML config", key="cmp_upload", on_change=pin_upload, label_visibility="collapsed")
if cfg.n_experts is not None and all(cfg.moe_layers):
    dense = dense_counterpart(cfg)
    st.button("Pin the dense model with the same active parameters", key="cmp_dense_equal",
              on_click=pin, args=(dense.name, dense),
              help="Each MoE FFN becomes one dense FFN as wide as the k routed plus the shared experts: the same "
                   "compute per token (no router), a fraction of the memory.")
if any(MIXERS[k].recurrent for s in cfg.layer_specs for k in s.mixers):
    try:
        twin = equal_params_transformer(cfg)
    except ConfigError as e:   # no FFN width to solve: say why instead of a button
        st.caption(md(f"No transformer of equal parameters: {'; '.join(e.problems)}"))
    else:
        st.button("Pin the transformer with the same parameters", key="cmp_transformer_equal", on_click=pin,
                  args=(twin.name, twin),
                  help="Every mixer layer softmax attention, the FFN width (d_ff, or expert_d_ff when every layer is "
                       "MoE) solved so the total parameters equal this hybrid's within one step of that width.")
if st.session_state.get(NOTE):
    st.warning(md(st.session_state[NOTE]))
unpin = st.multiselect("Pinned (remove one to unpin)", [lab for lab, _ in pins], default=[lab for lab, _ in pins],
                       key=f"cmp_pins_{len(pins)}_{'|'.join(lab for lab, _ in pins)}")
if len(unpin) < len(pins) and unpin:
    st.session_state[PINS] = [(lab, c) for lab, c in pins if lab in unpin]
    st.rerun()
if not unpin:
    st.info("Keep at least one pin.")

set_view_param("pins", pin_codec.encode_pins(st.session_state[PINS]))
configs = {lab: c for lab, c in st.session_state[PINS]}
labels = list(configs)
log = url_view.bound("cmp_log", url_view.flag("log"), True, st.toggle, "Logarithmic value axis",
                     help="Models of very different sizes stay readable side by side; switch off for linear bars.")
values = compare_view.compare_metrics(configs)
export.chart(charts.compare_bars("Parameters", labels, values["params"], "count", log), "cmp_params",
             "compare-parameters")
mem_cols = st.columns(2)
with mem_cols[0]:
    export.chart(charts.compare_bars("Memory", labels, values["memory"], "bytes", log), "cmp_memory",
                 "compare-memory")
with mem_cols[1]:
    export.chart(charts.compare_bars("FLOPs per token", labels, values["flops"], "flops", log), "cmp_flops",
                 "compare-flops")
st.caption("All closed forms (engine/budget): exact parameter counts; memory at batch 1 (KV cache in bf16 at the "
           "config's full context, a recurrent layer's fixed state in bf16 as vLLM holds it, training step with mixed-bf16 AdamW at sequence min(context, "
           f"{compare_view.COMPARE_TRAIN_SEQ:,})); training FLOPs per token at each config's own context length "
           "(causal and windowed query-key pairs only) beside the 6N rule.")

st.subheader("Side by side")
df, differing = tables.compare_table(configs)
st.caption(f"{len(differing)} of {len(df)} fields differ (highlighted).")
only = url_view.bound("cmp_only", url_view.flag("only"), False, st.toggle, "Show only differing fields")
shown = df.loc[differing] if only else df
st.dataframe(tables.highlight_rows(shown, differing), width="stretch", height="content",
             column_config={"_index": st.column_config.TextColumn("field", width="medium")})
