"""Engine results cached per config (st.cache_data keyed by the frozen config's fields), so a rerun after a
knob change recomputes only what that config has never seen. Pages call these instead of the engine directly
when the result is shown on every rerun."""
from __future__ import annotations

import streamlit as st

from engine.budget.params import ParamCount, count_params
from engine.config import ModelConfig


def _key(cfg: ModelConfig) -> tuple:
    return tuple(cfg.to_dict().items())


CACHE = dict(show_spinner=False, max_entries=512, hash_funcs={ModelConfig: _key})


@st.cache_data(**CACHE)
def params(cfg: ModelConfig) -> ParamCount:
    return count_params(cfg)


@st.cache_data(**CACHE)
def memory(cfg: ModelConfig, batch: int, seq: int, dtype: str = "bf16", policy: str = "mixed-bf16",
           optimizer: str = "adamw", recompute: str = "none"):
    from engine.budget.memory import memory_budget
    return memory_budget(cfg, batch, seq, dtype=dtype, policy=policy, optimizer=optimizer, recompute=recompute)


@st.cache_data(**CACHE)
def kv_cache(cfg: ModelConfig, batch: int, tokens: int, dtype: str = "bf16") -> int:
    from engine.budget.memory import kv_cache_bytes
    return kv_cache_bytes(cfg, batch, tokens, dtype=dtype)


@st.cache_data(**CACHE)
def flops(cfg: ModelConfig, batch: int, seq: int, causal: bool = False):
    from engine.budget.flops import flops_budget
    return flops_budget(cfg, batch, seq, causal=causal)


@st.cache_data(**CACHE)
def curves(names: tuple[str, ...], lo: float, hi: float, n: int = 201) -> dict:
    from engine.activation_curves import activation_curves
    return activation_curves(names, lo, hi, n)


@st.cache_data(**CACHE)
def surface(name: str, lo: float, hi: float, n: int = 61):
    from engine.activation_curves import gated_surface
    return gated_surface(name, lo, hi, n)


@st.cache_data(**{**CACHE, "max_entries": 8})
def live_stats(cfg: ModelConfig, tokens: int, device: str):
    from engine.measure.stats import model_stats
    return model_stats(cfg, tokens=tokens, device=device)
