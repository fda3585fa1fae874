"""A Nemotron-H config.json may give its layers as a list instead of hybrid_override_pattern: under transformers'
own key `layers_block_type` or its alias `layer_types` (NemotronHConfig.attribute_map). Every spelling of the same
layout imports to the same model, the one transformers builds."""
from __future__ import annotations

import pytest

from engine.interop.hf_config import import_hf
from tests.import_typos import published as read_published

transformers = pytest.importorskip("transformers")

FILES = ("nemotron-h-8b.json", "nvidia-nemotron-nano-9b-v2.json", "nemotron-3-nano-30b-a3b.json")


@pytest.mark.parametrize("key", ["layers_block_type", "layer_types"])
@pytest.mark.parametrize("name", FILES)
def test_a_layer_list_under_either_key_imports_as_the_pattern_does(name, key):
    published = read_published(name)
    listed = transformers.NemotronHConfig(**published).layers_block_type    # transformers' reading of the pattern
    as_list = {**{k: v for k, v in published.items() if k != "hybrid_override_pattern"}, key: listed}
    assert transformers.NemotronHConfig(**as_list).layers_block_type == listed
    assert import_hf(as_list).config == import_hf(published).config
