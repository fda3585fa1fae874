"""The session's config: last valid ModelConfig in st.session_state, mirrored in the URL query params.

The URL holds `preset=NAME` plus only the fields that differ from that preset, so a copied link reproduces the
exact config. A few keys choose what a page shows rather than the model (VIEW_PARAMS, e.g. the Lecture page's
`section` and `present`): the config parser ignores them and `sync_url` leaves them in place, so the page that owns
them reads and writes st.query_params directly. Everything is per session (st.session_state); nothing is kept in
module globals.
"""
from __future__ import annotations

from typing import Any

import streamlit as st

from app.deploy_view import URL_KEYS as DEPLOY_URL_KEYS
from app.sweep_view import URL_KEYS as SWEEP_URL_KEYS
from app.training_view import URL_KEYS as TRAINING_URL_KEYS
from engine.config import FIELDS, ConfigError, ModelConfig
from engine.limits import MAX_INT, MAX_LAYERS  # noqa: F401 -- the editor's bounds are the engine's
from engine.presets import PRESETS

DEFAULT_PRESET = "gpt2"
CFG, PRESET, PROBLEMS = "cfg", "preset", "cfg_problems"
# URL keys that are not config fields: what a page shows (app.url_view; the Trade-offs page's sweep in app.sweep_view;
# the Deploy page's layout in app.deploy_view; the Training page's run settings in app.training_view)
VIEW_PARAMS = ("section", "present", "mla_rank", "mla_rope", "mla_dtype", "state_view_dtype",  # Lecture
               "batch", "seq", "optimizer", "recompute", "kernel", "dtype", "causal", "device",   # Budgets
               "replica_gpus", "mark_gpus", "zoom",                    # Budgets' memory vs context
               "mode", "batches", "seqs", "budget",                                    # Latency (and dtype)
               "pins", "log", "only",                                                  # Compare
               "curves", "range", "tokens",                                            # Activations
               *SWEEP_URL_KEYS,                                                        # Trade-offs
               *DEPLOY_URL_KEYS,                                                       # Deploy
               *TRAINING_URL_KEYS)                                                     # Training
EDITOR_MAX_INT = MAX_INT     # JavaScript's Number.MAX_SAFE_INTEGER: the largest integer a browser number box holds


def widget_key(name: str) -> str:
    return f"field_{name}"


def preset_config(name: str) -> ModelConfig:
    return PRESETS[name].config


def to_url_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))   # str of a float is its shortest exact form
    return str(value)


def url_params(cfg: ModelConfig, preset: str) -> dict[str, str]:
    """`preset` plus every field whose value differs from the preset's."""
    base = preset_config(preset).to_dict()
    diff = {k: to_url_value(v) for k, v in cfg.to_dict().items() if base[k] != v}
    return {"preset": preset, **diff}


def config_from_params(params: dict[str, str]) -> tuple[str, ModelConfig, list[str]]:
    """(preset, config, problems) from URL params; a bad preset or value is reported and dropped, the rest of
    the link applies (the preset alone when what is left still does not make a valid config)."""
    problems = []
    preset = params.get("preset", DEFAULT_PRESET)
    if preset not in PRESETS:
        problems.append(f"preset: {preset!r} is not one of {', '.join(PRESETS)}")
        preset = DEFAULT_PRESET
    overrides = {k: v for k, v in params.items() if k != "preset" and k not in VIEW_PARAMS}
    while True:
        try:
            cfg = ModelConfig.from_dict(overrides, base=preset_config(preset))
            return preset, cfg, problems
        except ConfigError as e:
            problems += [f"URL: {p}" for p in e.problems]
            named = {p.split(":", 1)[0] for p in e.problems}
            rest = {k: v for k, v in overrides.items() if k in FIELDS and k not in named}
            if rest == overrides:
                return preset, preset_config(preset), problems
            overrides = rest


def ensure_state() -> None:
    """First run of a session: take the config from the URL (or the default preset)."""
    if CFG in st.session_state:
        return
    preset, cfg, problems = config_from_params(st.query_params.to_dict())
    set_config(cfg, preset)
    st.session_state[PROBLEMS] = problems


def set_config(cfg: ModelConfig, preset: str | None = None, load_widgets: bool = True) -> None:
    """Make `cfg` the session's valid config; optionally push its values into the editor's widgets."""
    st.session_state[CFG] = cfg
    if preset is not None:
        st.session_state[PRESET] = preset
    if load_widgets:
        for name in FIELDS:
            st.session_state[widget_key(name)] = widget_value(name, getattr(cfg, name))


def widget_value(name: str, value: Any) -> Any:
    """The editor shows floats as text (so 1e-06 and 500000.0 round-trip exactly), integers as text (so any
    typed number reaches validation: a browser number box refuses 1e20 itself, with no message naming the
    field), lists as comma-separated text and optional booleans as null/true/false choices; others as they are."""
    spec = FIELDS[name]
    if spec.type is int:
        return "" if value is None else str(value)
    if spec.type is float:
        return "null" if value is None else repr(value)
    if spec.type is tuple:
        return "null" if value is None else ", ".join(map(str, value))
    if spec.type is bool and spec.optional:
        return to_url_value(value)
    return value


def _through_entry_point() -> None:
    """Streamlit treats the `pages/` folder next to streamlit_app.py as its old folder-based multipage mode
    until the first st.navigation call in the process: a fresh server's first request straight to /budgets
    would run that page alone, without the sidebar. Leave that mode and rerun through the entry point.
    (A private Streamlit switch, tested by the browser test's cold deep link; absent in a Streamlit without the
    legacy mode, which then has nothing to leave.)"""
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


def current_config() -> ModelConfig:
    """The session's last valid config (what every page shows)."""
    _through_entry_point()
    ensure_state()
    return st.session_state[CFG]


def current_preset() -> str:
    ensure_state()
    return st.session_state[PRESET]


def sync_url() -> None:
    """Write the current config into the URL (view params kept), touching st.query_params only when it changed."""
    now = st.query_params.to_dict()
    want = url_params(current_config(), current_preset()) | {k: now[k] for k in VIEW_PARAMS if k in now}
    if now != want:
        st.query_params.from_dict(want)
