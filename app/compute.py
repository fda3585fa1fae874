"""Engine results cached per config (st.cache_data keyed by the config's canonical key, app.shared), so a rerun after a
knob change recomputes only what that config has never seen. Pages call these instead of the engine directly
when the result is shown on every rerun."""
from __future__ import annotations

import streamlit as st

from app.budget_view import kv_variants, token_grid
from app.shared import HASH_FUNCS
from engine.activation_grid import Curve, Surface, activation_curves, gated_surface
from engine.budget.context_memory import ContextMemory, Crossing, all_attention, context_memory, crossings
from engine.budget.devices import Roofline, roofline
from engine.budget.flops import FlopBudget, flops_budget
from engine.budget.memory import (POLICIES, POLICY_DTYPE, MemoryBudget, index_key_cache_bytes, kv_cache_bytes,
                                  memory_budget)
from engine.budget.params import ParamCount, count_params
from engine.config import ModelConfig
from engine.measure.stats import ModelStats, model_stats


CACHE = dict(show_spinner=False, max_entries=512, hash_funcs=HASH_FUNCS)   # configs hashed by their canonical key


@st.cache_data(**CACHE)
def params(cfg: ModelConfig) -> ParamCount:
    return count_params(cfg)


@st.cache_data(**CACHE)
def memory(cfg: ModelConfig, batch: int, seq: int, dtype: str = "bf16", policy: str = "mixed-bf16",
           optimizer: str = "adamw", recompute: str = "none", attention: str = "sdpa") -> MemoryBudget:
    return memory_budget(cfg, batch, seq, dtype=dtype, policy=policy, optimizer=optimizer, recompute=recompute,
                         attention=attention)


@st.cache_data(**CACHE)
def kv_cache(cfg: ModelConfig, batch: int, tokens: int, dtype: str = "bf16") -> int:
    return kv_cache_bytes(cfg, batch, tokens, dtype=dtype)


@st.cache_data(**CACHE)
def flops(cfg: ModelConfig, batch: int, seq: int, causal: bool = False) -> FlopBudget:
    return flops_budget(cfg, batch, seq, causal=causal)


@st.cache_data(**CACHE)
def curves(names: tuple[str, ...], lo: float, hi: float, n: int = 201) -> dict[str, Curve]:
    return activation_curves(names, lo, hi, n)


@st.cache_data(**CACHE)
def surface(name: str, lo: float, hi: float, n: int = 61) -> Surface:
    return gated_surface(name, lo, hi, n)


@st.cache_data(**{**CACHE, "max_entries": 8})
def live_stats(cfg: ModelConfig, tokens: int, device: str) -> ModelStats:
    return model_stats(cfg, tokens=tokens, device=device)


@st.cache_data(**CACHE)
def policy_memories(cfg: ModelConfig, batch: int, seq: int, optimizer: str = "adamw", recompute: str = "none",
                    attention: str = "sdpa") -> dict[str, MemoryBudget]:
    """A training step under each precision policy, activations held in the policy's dtype (POLICY_DTYPE)."""
    return {p: memory_budget(cfg, batch, seq, dtype=POLICY_DTYPE[p], policy=p, optimizer=optimizer,
                             recompute=recompute, attention=attention) for p in POLICIES}


@st.cache_data(**CACHE)
def kv_series(cfg: ModelConfig, batch: int, dtype: str = "bf16") -> tuple[tuple[int, ...], dict[str, list[int]]]:
    """The context grid up to context_length and the KV-cache bytes along it for the config and its
    attention variants (app.budget_view.kv_variants, the current config first; MLA adds its expanded cache,
    sparse attention its two parts: the latent cache and the indexer's FP8 keys)."""
    grid = token_grid(cfg.context_length)
    series = {label: [kv_cache_bytes(v, batch, t, dtype=dtype) for t in grid] for label, v in kv_variants(cfg).items()}
    if cfg.mla and cfg.sparse_attention:
        index = [index_key_cache_bytes(cfg, batch, t, dtype) for t in grid]
        series["part: MLA latent + rotary key"] = [total - i for total, i in zip(next(iter(series.values())), index)]
        series["part: indexer keys (FP8 + scale)"] = index
    if cfg.mla:   # the per-head keys and values the latent stands for
        series["MLA, expanded per-head K/V"] = [kv_cache_bytes(cfg, batch, t, dtype, "expanded") for t in grid]
    return grid, series


@st.cache_data(**CACHE)
def context_memories(cfg: ModelConfig, batch: int, dtype: str, gpus: int, devices: tuple[str, ...]
                     ) -> tuple[ContextMemory, ContextMemory | None, list[Crossing]]:
    """Inference memory along the context grid for cfg and (a hybrid) the same model with every mixer attention,
    and where each device's memory (`gpus` of them) is crossed; the grid holds every crossing exactly."""
    marks = crossings(cfg, cfg.context_length, batch, dtype, gpus, devices)
    hits = {t for c in marks for t in (c.tokens, c.all_attention_tokens) if t}
    grid = tuple(sorted(set(token_grid(cfg.context_length, 65)) | hits))
    dense = all_attention(cfg)
    return (context_memory(cfg, grid, batch, dtype),
            None if dense is cfg else context_memory(dense, grid, batch, dtype), marks)


@st.cache_data(**CACHE)
def rooflines(cfg: ModelConfig, device: str, batch: int, seq: int, dtype: str = "bf16") -> dict[str, Roofline]:
    return roofline(cfg, device, batch, seq, dtype)
