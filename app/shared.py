"""Pay once per server, not per session: what a page shows is a function of (config, page settings), so the first
session to draw it computes it and every later session, and every rerun, reuses it.

- `config_key`: a config's canonical identity (every field's value in declaration order, as a digest), so a
  cache lookup hashes one short string instead of walking 80 fields.
- `HASH_FUNCS`: how Streamlit's caches hash the arguments the app passes (configs by `config_key`, figure
  builders by name).
- `drawn`: st.cache_resource for functions that draw: Streamlit records the elements a cached function draws and
  replays them on a hit, so a chart, table or diagram another session drew costs its stored message, not a
  rebuild and re-serialization. Bounded (max_entries); widgets cannot live inside (Streamlit refuses them).
- `freeze_startup_objects`: Streamlit collects garbage after every script run; with torch, Plotly and pandas
  imported that walk over ~250,000 long-lived objects cost 0.15 CPU-seconds a run here, more than the page.
  Called at the start of every run; it works only when new modules were imported.
"""
from __future__ import annotations

import functools
import gc
import hashlib
import sys
import types
from dataclasses import fields
from typing import Callable, TypeVar

import streamlit as st

from engine.config import ModelConfig

F = TypeVar("F", bound=Callable)


@functools.lru_cache(maxsize=4096)
def config_key(cfg: ModelConfig) -> str:
    """Equal configs, equal keys: a digest of every field's value (repr: floats exact) in declaration order."""
    values = tuple(getattr(cfg, f.name) for f in fields(cfg))
    return hashlib.blake2b(repr(values).encode(), digest_size=16).hexdigest()


HASH_FUNCS = {ModelConfig: config_key, types.FunctionType: lambda f: f"{f.__module__}.{f.__qualname__}"}


def drawn(max_entries: int = 256) -> Callable[[F], F]:
    """A server-wide cache for a function that draws elements (and may return a value, shared, never mutated)."""
    return st.cache_resource(show_spinner=False, max_entries=max_entries, hash_funcs=HASH_FUNCS)


_modules_frozen = 0


def freeze_startup_objects() -> None:
    """Whenever modules were imported since the last call (the first run, and the first visit of a page that
    imports more): collect, then move every object alive into the permanent generation, so the collection after
    each script run walks only what runs create. Frozen objects are still freed by reference counting; only
    cycles among them (module-level tables, mostly) are never collected."""
    global _modules_frozen
    if len(sys.modules) != _modules_frozen:
        _modules_frozen = len(sys.modules)
        gc.collect()
        gc.freeze()
