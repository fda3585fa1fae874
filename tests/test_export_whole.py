"""Each Hugging Face writer's whole config.json, held as a reviewed spec (tests/golden/export_whole.json): every key
and value the family's writer gives for its own preset or published file, and for variants that reach its other
branches (a window on every layer, a dense Llama 4, a new-architecture Falcon, YaRN with and without MLA). A value
written wrong, a key dropped or renamed, shows up here even where a round trip through our reader (which falls
back to the class's defaults) would not notice it."""
from __future__ import annotations

import json
from typing import Any

import pytest

from engine.interop.hf_export import _WRITERS
from tests.export_whole_cases import CASES, written
from tests.golden import check_golden


def _compact(v: Any) -> Any:
    """One line per key: lists and dicts as compact JSON (1 and 1.0 differ there, as in the file)."""
    return json.dumps(v, separators=(",", ":"), sort_keys=True) if isinstance(v, (list, tuple, dict)) else v


def test_every_family_is_held():
    assert {family for family, _, _ in CASES.values()} == set(_WRITERS)


@pytest.mark.parametrize("name", CASES)
def test_the_whole_config_json_is_the_reviewed_one(name):
    out = written(name)[1]
    check_golden("export_whole", name, {k: _compact(v) for k, v in out.items()})
