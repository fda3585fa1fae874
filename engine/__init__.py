"""Transformer Architecture Explorer engine: pure PyTorch + stdlib (never imports streamlit).

The public API; the app, the CLI and the tests use these names.
"""
from engine.budget.devices import DEVICE_PROFILES, roofline
from engine.budget.flops import FlopBudget, flops_budget
from engine.budget.memory import MemoryBudget, kv_cache_bytes, memory_budget
from engine.budget.params import ParamCount, count_params
from engine.config import FIELDS, GROUPS, ConfigError, FieldSpec, ModelConfig
from engine.guard import MemoryRefusal, check_fits
from engine.model import DecoderLM, KVCache, build_model
from engine.presets import PRESETS, Preset, get_preset

__all__ = ["ConfigError", "DEVICE_PROFILES", "DecoderLM", "FIELDS", "FieldSpec", "FlopBudget", "GROUPS", "KVCache",
           "MemoryBudget", "MemoryRefusal", "ModelConfig", "PRESETS", "ParamCount", "Preset", "build_model",
           "check_fits", "count_params", "flops_budget", "get_preset", "kv_cache_bytes", "memory_budget", "roofline"]
