"""Every importer's defaults against transformers' own, for every key it reads, at published shapes.

A default can be right at the config class's own sizes and wrong anywhere else: a head_dim fixed at 128 where
transformers derives hidden_size / heads, an FFN width fixed where it is 4 * hidden, a kv-head count fixed where
it follows the query heads. So each check starts from a published config.json (tests/data/hf_configs, sources
in its index; bloom-560m and falcon-7b below) and leaves out one key at a time: our import of what is left must
equal our import of transformers' completion of it (AutoConfig.for_model(...).to_dict(): every missing key filled
in by transformers 5 from the realistic values around it). The keys left out are every key the file carries that
changes the forward pass; the keys it does not carry are already missing, and the first check covers them.
Where transformers' completion keeps the key null (the model derives it: GPT-2's n_inner = 4 * n_embd, a kv-head
count that follows the query heads, a head_dim of hidden / heads), both sides would go through our reading of
null, so there the reference is transformers' model itself: its parameter count on the meta device."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.budget.params import count_params
from engine.config import ConfigError
from engine.interop import FAMILIES, from_hf_config
from engine.interop.hf_defaults import INERT
from tests.helpers import hf_meta

transformers = pytest.importorskip("transformers", minversion="5.0")

DATA = Path(__file__).parent / "data" / "hf_configs"
EXTRA = {   # families without a file in tests/data/hf_configs: their published config.json
    # https://huggingface.co/bigscience/bloom-560m/blob/main/config.json (the keys transformers reads)
    "bloom-560m": {"model_type": "bloom", "apply_residual_connection_post_layernorm": False,
                   "attention_dropout": 0.0, "hidden_dropout": 0.0, "hidden_size": 1024, "layer_norm_epsilon": 1e-05,
                   "n_head": 16, "n_layer": 24, "vocab_size": 250880},
    # https://huggingface.co/tiiuae/falcon-7b/blob/main/config.json
    "falcon-7b": {"model_type": "falcon", "alibi": False, "apply_residual_connection_post_layernorm": False,
                  "attention_dropout": 0.0, "bias": False, "hidden_dropout": 0.0, "hidden_size": 4544,
                  "layer_norm_epsilon": 1e-05, "multi_query": True, "new_decoder_architecture": False,
                  "num_attention_heads": 71, "num_hidden_layers": 32, "parallel_attn": True, "vocab_size": 65024},
}
PUBLISHED = {p.stem: json.loads(p.read_text()) for p in sorted(DATA.glob("*.json")) if p.name != "index.json"}
PUBLISHED.update(EXTRA)


def completed(d: dict) -> dict | None:
    """transformers' reading of d with every missing key filled in; None when transformers refuses d itself."""
    try:
        return transformers.AutoConfig.for_model(d["model_type"], **{k: v for k, v in d.items()
                                                                      if k != "model_type"}).to_dict()
    except Exception:        # its validators (huggingface_hub's StrictDataclassClassValidationError, ValueError)
        return None


def ours(d: dict):
    try:
        return from_hf_config(d).replace(name="x")
    except ConfigError as e:
        return ("refused", tuple(sorted(p.split(":")[0] for p in e.problems)))


def test_every_family_is_checked_at_a_published_shape():
    assert {d["model_type"] for d in PUBLISHED.values()} == set(FAMILIES)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_keys_a_published_config_leaves_out_read_as_transformers_fills_them(name):
    d = PUBLISHED[name]
    full = completed(d)
    assert full is not None
    assert ours(d) == ours(full)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_key_left_out_reads_as_transformers_default_at_this_shape(name):
    d = PUBLISHED[name]
    checked = []
    for key in sorted(k for k in d if k not in INERT):
        partial = {k: v for k, v in d.items() if k != key}
        full = completed(partial)
        if full is None:                     # transformers cannot build the config without this key either
            continue
        mine, theirs = ours(partial), ours(full)
        if isinstance(mine, tuple) and isinstance(theirs, tuple):
            continue                         # both refused (e.g. the default makes the heads not divide)
        assert mine == theirs, (key, mine if isinstance(mine, tuple) else "", theirs if isinstance(theirs, tuple) else "")
        if full.get(key) is None and not isinstance(mine, tuple):        # derived by transformers' model
            assert count_params(mine).total == sum(p.numel() for p in hf_meta(partial).parameters()), key
        checked.append(key)
    assert len(checked) >= len([k for k in d if k not in INERT]) // 2, checked    # most keys really were checked
