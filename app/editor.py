"""The sidebar: preset picker, a config editor generated from the field declarations in engine/config.py,
and YAML download/upload. Invalid values are listed under their field; the pages keep showing the last valid
config, so a half-typed value never breaks the view."""
from __future__ import annotations

from typing import Any

import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from app import state, widgets
from app.text import md
from engine.config import FIELDS, GROUPS, ConfigError, FieldSpec, ModelConfig
from engine.limits import MAX_CONFIG_BYTES
from engine.presets import PRESETS
from engine.units import fmt_count

PICK, UPLOAD, UPLOAD_PROBLEMS, EDIT_PROBLEMS = "preset_pick", "yaml_upload", "upload_problems", "edit_problems"
NULL_LABELS = {"norm_bias": "follow the norm"}   # what null means, for the optional booleans
SHOWN = "editor_groups_shown"   # the groups whose widgets the last run drew
GROUP_TITLES = {"sizes": "Sizes", "attention": "Attention", "layers": "Layer kinds (hybrids)",
                "gdn": "Linear attention (Gated DeltaNet, KDA, lightning)", "ssm": "State space (Mamba)",
                "position": "Position", "ffn": "Feed-forward", "moe": "Mixture of experts",
                "normalization": "Normalization", "block": "Block", "output": "Output",
                "checkpoint": "Checkpoint as shipped"}


def _load_preset() -> None:
    name = st.session_state[PICK]
    state.set_config(state.preset_config(name), name)
    st.session_state[state.PROBLEMS] = []


def read_yaml(upload: UploadedFile) -> tuple[ModelConfig | None, list[str]]:
    """An uploaded YAML file -> (config, []) or (None, problems): size-limited, UTF-8, safe_load."""
    if upload.size > MAX_CONFIG_BYTES:
        return None, [f"yaml: {upload.name} is {upload.size:,} bytes; the limit is {MAX_CONFIG_BYTES:,} bytes"]
    try:
        return ModelConfig.from_yaml(upload.getvalue().decode("utf-8")), []
    except UnicodeDecodeError:
        return None, [f"yaml: {upload.name} is not UTF-8 text"]
    except ConfigError as e:
        return None, [f"{upload.name}: {p}" for p in e.problems]


def _load_yaml() -> None:
    """Apply an uploaded YAML file once, when it arrives (not on every rerun)."""
    upload = st.session_state.get(UPLOAD)
    st.session_state[UPLOAD_PROBLEMS] = []
    if upload is None:
        return
    cfg, problems = read_yaml(upload)
    st.session_state[UPLOAD_PROBLEMS] = problems
    if cfg is not None:
        state.set_config(cfg)
        st.session_state[state.PROBLEMS] = []


def _raw_values() -> dict[str, Any]:
    """What the editor's widgets hold right now (before they are drawn in this run). Only the groups drawn in the
    last run have widgets; every other field holds the current valid config's value."""
    cfg, shown = state.current_config(), st.session_state.get(SHOWN, {"sizes"})
    return {name: st.session_state.get(state.widget_key(name), state.widget_value(name, getattr(cfg, name)))
            if spec.group in shown else state.widget_value(name, getattr(cfg, name)) for name, spec in FIELDS.items()}


def _apply_couplings(raw: dict[str, Any]) -> dict[str, str]:
    """Fields another field makes irrelevant or fixed: name -> why. RMSNorm forces norm_bias off, so switching
    norm never leaves the config stuck on an error."""
    why = {}
    if raw["norm"] == "rmsnorm":
        if raw["norm_bias"] == "true":
            raw["norm_bias"] = st.session_state[state.widget_key("norm_bias")] = "null"
        why["norm_bias"] = "RMSNorm has no bias term, so this follows the norm (off)."
    if raw["block"] != "parallel":
        why["parallel_shared_norm"] = "Only used by parallel blocks."
    if raw["attn_window"] is None:
        why["global_every"] = "Only used with a sliding window (attn_window)."
    if raw["position"] != "rope":
        why.update({n: "Only used with position = rope." for n in FIELDS if n.startswith("rope_")})
    if not raw["qk_norm"]:
        why["qk_norm_scope"] = "Only used with qk_norm."
    return why


def _scaling_notes(raw: dict[str, Any]) -> dict[str, str]:
    """Scaling fields the chosen rope_scaling does not read: a caption only (still editable, so a value can be
    set before switching the type)."""
    kind = raw["rope_scaling"]
    return {n: f"Not used by rope_scaling = {kind}." for n, uses in SCALING_USES.items() if kind not in uses}


def _unused_notes(raw: dict[str, Any]) -> dict[str, str]:
    """Captions on fields the current choices do not read: the RoPE scaling fields, the clamped SwiGLU's."""
    notes = _scaling_notes(raw) if raw["position"] == "rope" else {}
    if raw["norm"] == "layernorm" and raw["norm_bias"] == "null":
        notes["norm_bias"] = "Follows the norm: on for layernorm."
    if raw["ffn"] != "swiglu_clamped":
        notes.update(dict.fromkeys(("swiglu_limit", "swiglu_alpha"), "Only used with ffn = swiglu_clamped (gpt-oss)."))
    if raw["index_topk"] is None:
        notes.update(dict.fromkeys(("index_n_heads", "index_head_dim", "index_rope_interleave", "indexer_types"),
                                   "Only used with sparse attention (index_topk set, on MLA)."))
    return notes


# which rope_scaling types read each RoPE scaling field
SCALING_USES = {
    "rope_factor": ("linear", "dynamic", "llama3", "yarn", "longrope"),
    "rope_original_context": ("dynamic", "llama3", "yarn", "longrope"),
    "rope_low_freq_factor": ("llama3",), "rope_high_freq_factor": ("llama3",),
    "rope_beta_fast": ("yarn",), "rope_beta_slow": ("yarn",), "rope_truncate": ("yarn",),
    "rope_attention_factor": ("yarn", "longrope"), "rope_short_factor": ("longrope",),
    "rope_long_factor": ("longrope",)}


def _validate(raw: dict[str, Any]) -> list[str]:
    """Make the widgets' values the current config if they are valid; return the problems otherwise."""
    try:
        cfg = ModelConfig.from_dict(raw, base=state.preset_config(state.current_preset()))
    except ConfigError as e:
        return e.problems
    if cfg != state.current_config():
        state.set_config(cfg, load_widgets=False)
    return []


def _tooltip(spec: FieldSpec) -> str:
    text = f"{spec.help}\n\nAllowed: {spec.allowed()}."
    if spec.optional:
        text += f" Leave empty (or type null) for null: {spec.null}."
    return text


def _field_widget(spec: FieldSpec, disabled: bool, raw: dict[str, Any]) -> None:
    key, tip = state.widget_key(spec.name), _tooltip(spec)
    if spec.type is bool and spec.optional:   # null, true, false: null takes the value another field implies
        # The labels never depend on another field: Streamlit's selectbox sends its label back as the value, so a
        # label that changed with the norm came back as "follow the norm (off)" and froze the editor. What null
        # resolves to is the caption under the box (_unused_notes).
        st.selectbox(spec.name, ("null", "true", "false"), key=key, help=tip, disabled=disabled,
                     format_func=lambda v: NULL_LABELS.get(spec.name, "null") if v == "null" else v)
    elif spec.type is bool:
        st.checkbox(spec.name, key=key, help=tip, disabled=disabled)
    elif spec.choices and spec.type is not tuple:   # a list field's choices are its items' (e.g. full, sliding)
        st.selectbox(spec.name, spec.choices, key=key, help=tip, disabled=disabled)
    else:  # numbers as text: every typed value reaches validation, which names the field and the allowed range
        # (a number box refuses 1e20 in the browser with a red frame and no message); floats so 1e-06 and
        # 500000.0 round-trip exactly; lists as comma-separated text; names as text
        st.text_input(spec.name, key=key, help=tip, disabled=disabled,
                      placeholder=f"null: {spec.null}" if spec.optional else None)


def group_key(group: str) -> str:
    return f"editor_group_{group}"


def _editor(problems: list[str], why: dict[str, str], notes: dict[str, str], raw: dict[str, Any]) -> None:
    """One expander per group. Only an open group draws its widgets (about 80 in all: drawing every one on each
    rerun was most of a knob change's server time); opening one reruns with its widgets filled from the config.
    A group with an invalid value opens itself."""
    by_field: dict[str, list[str]] = {}
    for p in problems:
        by_field.setdefault(p.split(":", 1)[0], []).append(p)
    shown_before, shown = st.session_state.get(SHOWN, {"sizes"}), set()
    for group in GROUPS:
        specs = [s for s in FIELDS.values() if s.group == group]
        bad = any(s.name in by_field for s in specs)
        if bad:
            st.session_state[group_key(group)] = True
        box = st.expander(GROUP_TITLES[group] + (" — check values" if bad else ""), expanded=group == "sizes",
                          key=group_key(group), on_change="rerun")
        if not box.open:
            continue
        shown.add(group)
        with box:
            for spec in specs:
                if group not in shown_before:   # its widgets start from the values the editor holds
                    st.session_state[state.widget_key(spec.name)] = raw[spec.name]
                _field_widget(spec, spec.name in why and spec.name not in by_field, raw)
                if spec.name in why or spec.name in notes:
                    st.caption(why.get(spec.name) or notes[spec.name])
                for p in by_field.get(spec.name, []):
                    st.error(md(p))
    for p in problems:
        if p.split(":", 1)[0] not in FIELDS:
            st.error(md(p))
    st.session_state[SHOWN] = shown


def _yaml_io(cfg: ModelConfig) -> None:
    st.download_button("Download YAML", cfg.to_yaml, file_name=f"{cfg.name}.yaml", mime="application/x-yaml",
                       on_click="ignore", width="stretch",
                       help="The current valid config as YAML; upload it here or pass it to "
                            "`python -m engine ... --config FILE`.")
    widgets.yaml_uploader("Upload YAML", key=UPLOAD, on_change=_load_yaml,
                          help="A YAML mapping of field: value; missing fields take their defaults.")
    for p in st.session_state.get(UPLOAD_PROBLEMS, []):
        st.error(md(p))


def sidebar() -> None:
    """Draw the shared sidebar and update the session's config from it."""
    state.ensure_state()
    st.session_state.setdefault(PICK, state.current_preset())
    preset = PRESETS[st.session_state[PICK]]
    st.selectbox("Preset", list(PRESETS), key=PICK, on_change=_load_preset,
                 help="A real model's published configuration; the editor below starts from it.")
    st.caption(f"Reference: {fmt_count(preset.reference_params)} parameters ({preset.source}). {preset.notes}")
    st.button("Reset to preset", on_click=_load_preset, width="stretch")
    raw = _raw_values()
    why = _apply_couplings(raw)
    problems = _validate(raw)
    st.session_state[EDIT_PROBLEMS] = problems
    _editor(problems, why, _unused_notes(raw), raw)
    _yaml_io(state.current_config())
