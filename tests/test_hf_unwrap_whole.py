"""A multimodal config.json unwrapped by hand: the whole Unwrapped (text config, note, towers, ignored keys, word
for word) for each way the head is tied, and a checkpoint's language-model tensors renamed."""
from __future__ import annotations

import pytest

from engine.interop.hf_wrappers import Unwrapped, language_state, unwrap

SRC = "{} multimodal config.json: the language model is its text_config ({}); vision weights are not counted"
VISION = "vision_config: the vision tower and its projector (not part of the language model)"
IMAGE = "image_token_index: a multimodal setting (image tokens, projector); the language model does not read it"


def test_gemma3_ties_by_the_top_level_key_and_lists_the_rest():
    d = {"model_type": "gemma3", "_name_or_path": "g/3", "image_token_index": 7, "tie_word_embeddings": False,
         "text_config": {"hidden_size": 8, "tie_word_embeddings": True}, "vision_config": {"x": 1},
         "audio_config": {"y": 2}}
    assert unwrap(d) == Unwrapped(
        {"hidden_size": 8, "tie_word_embeddings": False, "model_type": "gemma3_text", "_name_or_path": "g/3"},
        SRC.format("gemma3", "gemma3_text"), [VISION],
        ["text_config.tie_word_embeddings: True is not read; transformers 5 ties the gemma3 head by the top-level "
         "key (False)",
         "audio_config: a multimodal setting (image tokens, projector); the language model does not read it",
         IMAGE])


def test_an_absent_top_level_key_ties_by_the_wrappers_default_and_a_named_text_type_is_kept():
    d = {"model_type": "qwen3_vl", "text_config": {"model_type": "qwen3_vl_text", "_name_or_path": "own"},
         "_name_or_path": "top", "vision_config": None}
    assert unwrap(d) == Unwrapped({"model_type": "qwen3_vl_text", "_name_or_path": "own", "tie_word_embeddings": False},
                                  SRC.format("qwen3_vl", "qwen3_vl_text"), [], [])
    assert unwrap({"model_type": "gemma3", "text_config": {"tie_word_embeddings": True}}).ignored == []


def test_llama4_ties_by_its_text_config_and_says_the_top_level_key_is_not_read():
    d = {"model_type": "llama4", "tie_word_embeddings": True, "text_config": {"tie_word_embeddings": False}}
    assert unwrap(d) == Unwrapped({"tie_word_embeddings": False, "model_type": "llama4_text"},
                                  SRC.format("llama4", "llama4_text"), [],
                                  ["tie_word_embeddings: the llama4 language model ties by text_config's key"])


def test_kimi_k2_text_is_read_as_deepseek_v3_and_says_so():
    d = {"model_type": "kimi_k25", "text_config": {"model_type": "kimi_k2"}}
    assert unwrap(d) == Unwrapped({"model_type": "deepseek_v3", "tie_word_embeddings": True},
                                  SRC.format("kimi_k25", "deepseek_v3"), [],
                                  ["text_config.model_type: 'kimi_k2' is read as deepseek_v3 (transformers renames "
                                   "it)"])


def test_mistral3_without_a_text_config_builds_the_classes_default():
    u = unwrap({"model_type": "mistral3"})
    assert (u.text["model_type"], u.text["hidden_size"], u.text["num_hidden_layers"], u.text["vocab_size"],
            u.text["tie_word_embeddings"]) == ("mistral", 5120, 40, 131072, True)
    assert u.source == SRC.format("mistral3", "mistral") and (u.not_counted, u.ignored) == ([], [])


def test_a_text_config_that_is_not_an_object_is_named():
    with pytest.raises(ValueError) as e:
        unwrap({"model_type": "gemma3", "text_config": [1]})
    assert str(e.value) == "text_config: expected a JSON object (the language model's config), got list"


@pytest.mark.parametrize("family, state, want", [
    ("gemma3", {"model.language_model.layers.0.w": 1, "lm_head.weight": 2, "model.vision_tower.x": 3,
                "lm_headless.weight": 4}, {"model.layers.0.w": 1, "lm_head.weight": 2}),
    ("llama4", {"language_model.model.norm.weight": 1, "language_model.lm_head.weight": 2, "lm_head.weight": 3,
                "vision_model.x": 4}, {"model.norm.weight": 1, "lm_head.weight": 2}),
])
def test_the_language_models_tensors_take_the_text_familys_names(family, state, want):
    assert language_state(family, state) == want
