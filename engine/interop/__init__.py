"""Interoperability with Hugging Face transformers: config import/export, weight conversion, parity checks.

Importing this package does not import transformers (a dev/test dependency); only the functions that build
transformers models do, when called.
"""
from engine.interop.hf_config import FAMILIES, from_hf_config
from engine.interop.hf_export import to_hf_config
from engine.interop.hf_models import (from_transformers, hf_model_from_config, load_into, logits_gap,
                                      read_checkpoint, scramble_, to_transformers)
from engine.interop.rope_order import rope_half_to_interleaved, rope_interleaved_to_half
from engine.interop.weights import hf_to_ours, ours_to_hf

__all__ = ["FAMILIES", "from_hf_config", "from_transformers", "hf_model_from_config", "hf_to_ours", "load_into",
           "logits_gap", "ours_to_hf", "read_checkpoint", "rope_half_to_interleaved", "rope_interleaved_to_half",
           "scramble_", "to_hf_config", "to_transformers"]
