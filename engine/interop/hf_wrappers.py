"""Multimodal config.json files (Gemma 3/4, Llama 4, Mistral 3, Qwen3-VL, Qwen3.5, Kimi K2.5): the language model
is the `text_config`, read by its own family's reader; the vision (and audio) towers and the projector are
listed as not counted, the image-token ids and projector settings as not part of the language model.

Which `tie_word_embeddings` ties the head, as transformers 5.24 builds these models: the top-level key (the
wrapper class's default when absent: Gemma 3/4, Mistral 3 and Kimi K2.5 tie, Qwen3-VL and Qwen3.5 do not), the
text_config's being unread; Llama 4 keeps a whole causal LM inside and reads the text_config's. Kimi K2.5's text
model is a DeepSeek-V3 renamed kimi_k2 (transformers renames it back). In the checkpoint the language model's
tensors sit under a prefix (`model.language_model.`, Llama 4 `language_model.model.`) and its head under
`lm_head` (Llama 4 `language_model.lm_head`); `language_state` maps them to the text family's names.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.interop.hf_defaults import INERT


@dataclass(frozen=True)
class Wrapper:
    text_type: str                 # the text_config's model_type when it names none (the class's default)
    tie_from_top: bool             # transformers ties by the top-level key (else by the text_config's)
    tie_default: bool              # the wrapper class's tie_word_embeddings
    towers: tuple[str, ...]        # sub-configs of the other modalities: not counted
    prefix: str = "model.language_model."
    head: str = "lm_head"
    text_default: tuple = ()       # the text_config the class builds when the file has none ((key, value) pairs)


WRAPPERS: dict[str, Wrapper] = {
    "gemma3": Wrapper("gemma3_text", True, True, ("vision_config",)),
    "gemma4": Wrapper("gemma4_text", True, True, ("vision_config", "audio_config")),
    "llama4": Wrapper("llama4_text", False, False, ("vision_config",), "language_model.model.",
                      "language_model.lm_head"),
    "mistral3": Wrapper("mistral", True, True, ("vision_config",), text_default=tuple(dict(   # Mistral-Small-3.1
        attention_dropout=0.0, head_dim=128, hidden_act="silu", hidden_size=5120, intermediate_size=32768,
        max_position_embeddings=131072, model_type="mistral", num_attention_heads=32, num_hidden_layers=40,
        num_key_value_heads=8, rms_norm_eps=1e-05, rope_theta=1000000000.0, sliding_window=None,
        vocab_size=131072).items())),
    "qwen3_vl": Wrapper("qwen3_vl_text", True, False, ("vision_config",)),
    "qwen3_vl_moe": Wrapper("qwen3_vl_moe_text", True, False, ("vision_config",)),
    "qwen3_5": Wrapper("qwen3_5_text", True, False, ("vision_config",)),
    "qwen3_5_moe": Wrapper("qwen3_5_moe_text", True, False, ("vision_config",)),
    "kimi_k25": Wrapper("deepseek_v3", True, True, ("vision_config",)),
}
_RENAMED = {"kimi_k2": "deepseek_v3"}   # Kimi_K25Config hands a kimi_k2 text_config to DeepseekV3Config
# top-level keys every wrapper passes on to the text model or that are bookkeeping of the whole checkpoint
_SHARED = {"model_type", "text_config", "tie_word_embeddings", "_name_or_path", "architectures",
           "transformers_version", "dtype", "torch_dtype", "initializer_range", "use_cache"}


@dataclass(frozen=True)
class Unwrapped:
    text: dict[str, Any]           # the language model's config.json, as its family's reader sees it
    source: str                    # the note: which part of the file the language model is
    not_counted: list[str]         # the other towers
    ignored: list[str]             # multimodal settings the language model does not read


def unwrap(d: dict[str, Any]) -> Unwrapped:
    """The text_config of a multimodal config, tied as transformers ties the whole model, with the note saying
    so; raises ValueError naming the key when text_config is not a mapping."""
    family = d["model_type"]
    w = WRAPPERS[family]
    text = d.get("text_config")
    if text is None:
        text = dict(w.text_default)
    if not isinstance(text, dict):
        raise ValueError(f"text_config: expected a JSON object (the language model's config), got "
                         f"{type(text).__name__}")
    text = dict(text)
    text_type = _RENAMED.get(text.get("model_type") or w.text_type, text.get("model_type") or w.text_type)
    ignored = []
    if text_type != (text.get("model_type") or w.text_type):
        ignored.append(f"text_config.model_type: {text['model_type']!r} is read as {text_type} (transformers "
                       f"renames it)")
    text["model_type"] = text_type
    if w.tie_from_top:
        top = d.get("tie_word_embeddings")
        tie = w.tie_default if top is None else top
        if "tie_word_embeddings" in text and text["tie_word_embeddings"] != tie:
            ignored.append(f"text_config.tie_word_embeddings: {text['tie_word_embeddings']!r} is not read; "
                           f"transformers 5 ties the {family} head by the top-level key ({tie!r})")
        text["tie_word_embeddings"] = tie
    elif "tie_word_embeddings" in d:
        ignored.append(f"tie_word_embeddings: the {family} language model ties by text_config's key")
    for key in ("_name_or_path",):
        if d.get(key) and not text.get(key):
            text[key] = d[key]
    not_counted = [f"{k}: the {k.removesuffix('_config')} tower and its projector (not part of the language "
                   f"model)" for k in w.towers if d.get(k) is not None]
    for key in sorted(set(d) - _SHARED - INERT - set(w.towers)):
        ignored.append(f"{key}: a multimodal setting (image tokens, projector); the language model does not read it")
    source = (f"{family} multimodal config.json: the language model is its text_config ({text_type}); "
              f"vision weights are not counted")
    return Unwrapped(text, source, not_counted, ignored)


def language_state(family: str, state: dict[str, Any]) -> dict[str, Any]:
    """A multimodal checkpoint's language-model tensors under the text family's names (`model.*`, `lm_head`);
    the other towers' tensors are left out."""
    w = WRAPPERS[family]
    out = {}
    for key, value in state.items():
        if key.startswith(w.prefix):
            out["model." + key[len(w.prefix):]] = value
        elif key.startswith(w.head + "."):
            out["lm_head" + key[len(w.head):]] = value
    return out
