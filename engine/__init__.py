"""Transformer Architecture Explorer engine: pure PyTorch + stdlib (never imports streamlit).

The public API; the app, the CLI and the tests use these names.
"""
from engine.budget.params import ParamCount, count_params
from engine.config import FIELDS, GROUPS, ConfigError, FieldSpec, ModelConfig
from engine.model import DecoderLM, KVCache, build_model
from engine.presets import PRESETS, Preset, get_preset

__all__ = ["ConfigError", "DecoderLM", "FIELDS", "FieldSpec", "GROUPS", "KVCache", "ModelConfig", "PRESETS",
           "ParamCount", "Preset", "build_model", "count_params", "get_preset"]
