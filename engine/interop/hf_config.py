"""Hugging Face config.json -> ModelConfig, for the families we can express exactly.

Read the way transformers reads it: a missing key (or null) means the config class default, so hf_defaults.py
copies those defaults. Every key is either understood, known not to change the forward pass (ids,
bookkeeping, init), or reported: a value we cannot express (a RoPE type we do not model, Falcon-ALiBi, a query
scale other than 1/sqrt(head_dim), biases on attention but not the MLP, ...) is a ConfigError naming the HF key,
never a silent approximation. Pure stdlib: importing a config needs no transformers.

The readers live with their families: hf_classic.py (GPT-2 era key names), hf_llama_like.py (Llama, Qwen, Gemma,
...), hf_moe.py, hf_deepseek.py, hf_gpt_oss.py, hf_recent.py and hf_recent_moe.py (2025-26 families), hf_llama4.py;
a multimodal config's language model is read from its text_config (hf_wrappers.py); families we know but cannot
build are refused with their reason (hf_refused.py). ModelConfig's own refusals are restated at the key of the
file that set the field (hf_keys.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from engine.config import ConfigError, ModelConfig
from engine.interop.hf_keys import in_file_terms
from engine.interop.hf_quant import quantization_fields
from engine.interop.hf_reader import _Reader
from engine.interop.hf_refused import REFUSED, refusal
from engine.interop.hf_types import type_problems
from engine.interop.hf_wrappers import WRAPPERS, unwrap

_READERS: dict[str, Callable[[_Reader], dict[str, Any]]] = {}

from engine.interop.hf_classic import READERS as _CLASSIC_READERS  # noqa: E402

_READERS.update(_CLASSIC_READERS)
from engine.interop.hf_llama_like import READERS as _LLAMA_LIKE_READERS  # noqa: E402

_READERS.update(_LLAMA_LIKE_READERS)
from engine.interop.hf_moe import READERS as _MOE_READERS  # noqa: E402

_READERS.update(_MOE_READERS)
from engine.interop.hf_deepseek import READERS as _DEEPSEEK_READERS  # noqa: E402

_READERS.update(_DEEPSEEK_READERS)
from engine.interop.hf_dsa import NOT_FAMILIES as _NOT_FAMILIES, READERS as _DSA_READERS  # noqa: E402

_READERS.update(_DSA_READERS)   # kimi_k2 (a DeepSeek-V3 alias) and deepseek_v4 (refused by field) read too
from engine.interop.hf_gpt_oss import READERS as _GPT_OSS_READERS  # noqa: E402

_READERS.update(_GPT_OSS_READERS)
from engine.interop.hf_qwen_hybrid import READERS as _QWEN_HYBRID_READERS  # noqa: E402

_READERS.update(_QWEN_HYBRID_READERS)
from engine.interop.hf_recent import READERS as _RECENT_READERS  # noqa: E402

_READERS.update(_RECENT_READERS)
from engine.interop.hf_recent_moe import READERS as _RECENT_MOE_READERS  # noqa: E402

_READERS.update(_RECENT_MOE_READERS)
from engine.interop.hf_llama4 import READERS as _LLAMA4_READERS  # noqa: E402

_READERS.update(_LLAMA4_READERS)
import engine.interop.hf_ssm_defaults  # noqa: E402,F401  (registers the families' defaults)
from engine.interop.hf_ssm import READERS as _SSM_READERS  # noqa: E402

_READERS.update(_SSM_READERS)
from engine.interop.hf_kimi import READERS as _KIMI_READERS  # noqa: E402
from engine.interop.hf_minimax import READERS as _MINIMAX_READERS  # noqa: E402

_READERS.update(_KIMI_READERS, **_MINIMAX_READERS)
# a multimodal wrapper imports when its text model's family does
FAMILIES = (tuple(f for f in _READERS if f not in _NOT_FAMILIES)
            + tuple(w for w, spec in WRAPPERS.items() if spec.text_type in _READERS))

# Every ModelConfig field a reader does not set takes this value (not ModelConfig's GPT-2 default).
NEUTRAL: dict[str, Any] = dict(
    n_kv_heads=None, head_dim=None, attn_window=None, global_every=None, qk_norm=False, attn_softcap=None,
    qkv_bias=False, rope_base=10000.0, rope_fraction=1.0, ffn_multiple_of=256, norm_bias=None, norm_affine=True,
    embed_norm=False, norm_placement="pre", final_norm=True, block="serial", parallel_shared_norm=False,
    dropout=0.0, embed_scale=False, logit_softcap=None, rope_scaling="none", rope_factor=1.0,
    rope_original_context=None, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0, rope_beta_fast=32.0,
    rope_beta_slow=1.0, rope_truncate=True, rope_attention_factor=None, rope_short_factor=None,
    rope_long_factor=None, layer_types=None, ffn_types=None, state_dtype=None, attn_gate=None, attn_scale=None,
    rope_local_base=None, nope_layers=None, head_bias=False, logit_scale=1.0, ckpt_format="none", ckpt_bits=None,
    ckpt_group_size=None, ckpt_double_quant=False, ckpt_keep=None, residual_alpha=1.0, mla_norm_eps=None,
    index_topk=None, indexer_types=None)


@dataclass(frozen=True)
class Imported:
    """What import-hf reads from a config.json: the config, the keys accepted but not read (with why), where in
    the file the language model came from, and the parts of the checkpoint that are not counted."""
    config: ModelConfig
    family: str = ""            # the reader's family (a multimodal file's: its text model's)
    ignored: list[str] = field(default_factory=list)
    source: str = ""
    not_counted: list[str] = field(default_factory=list)


def from_hf_config(d: dict[str, Any]) -> ModelConfig:
    """A transformers config.json dict -> ModelConfig computing the same function, or ConfigError."""
    return import_hf(d).config


def import_hf_config(d: dict[str, Any]) -> tuple[ModelConfig, list[str]]:
    """(config, ignored): the ModelConfig, and one line per key present that transformers does not read for
    this model either (accepted, listed for `import-hf --verbose`), or ConfigError."""
    got = import_hf(d)
    return got.config, got.ignored


def import_hf(d: dict[str, Any]) -> Imported:
    """A config.json dict -> Imported, or ConfigError naming each HF key we cannot express. A multimodal file's
    language model is its text_config (problems there are named text_config.<key>)."""
    if not isinstance(d, dict):
        raise ConfigError([f"config.json: expected a JSON object, got {type(d).__name__}"])
    if problems := type_problems(d):
        raise ConfigError(problems)
    family = d.get("model_type")
    source, not_counted, ignored, where = f"{family} config.json", [], [], ""
    if family in WRAPPERS:
        try:
            inner = unwrap(d)
        except ValueError as e:
            raise ConfigError([str(e)]) from None
        d, source, not_counted, ignored, where = inner.text, inner.source, inner.not_counted, inner.ignored, "text_config."
        if problems := type_problems(d):
            raise ConfigError([where + p for p in problems])
        family = d["model_type"]
    if family not in _READERS:
        if family in REFUSED:
            raise ConfigError([where + refusal(family)])
        raise ConfigError([f"{where}model_type: {family!r} is not one of the families we import exactly: "
                           f"{', '.join(FAMILIES)}"])
    r = _Reader(d, family)
    try:
        fields = _READERS[family](r)
    except (TypeError, ValueError, ZeroDivisionError, AttributeError) as e:   # e.g. "hidden_size": "big"
        raise ConfigError([f"config.json: a {family} size or setting has the wrong type or value ({e})"]) from None
    fields.update(quantization_fields(r))
    problems = r.problems + r.unknown()
    if problems:
        raise ConfigError([where + p for p in problems])
    # the last folder of _name_or_path ("org/Model/" -> "Model"); a blank one leaves the family's name
    name = str(d.get("_name_or_path") or family).strip().rstrip("/").rpartition("/")[2].strip() or family
    try:
        config = ModelConfig.from_dict({**NEUTRAL, **fields, "name": name})
    except ConfigError as e:   # they name our fields; the user wrote the file's keys
        raise ConfigError(in_file_terms(e.problems, fields, d, where)) from None
    return Imported(config, family, ignored + [where + line for line in r.ignored], source, not_counted)
