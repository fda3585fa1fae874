"""A published config.json written back: every preset family's file in tests/data/hf_configs that its own family
writes exactly gives back the file's own value for each key we write that the file holds (a value the writer gets
wrong or spells differently reads as itself here, even where our reader would take the default back)."""
import json
from pathlib import Path

import pytest

from engine.interop import from_hf_config
from engine.interop.hf_export import _WRITERS, hf_problems

DATA = Path(__file__).parent / "data" / "hf_configs"
FILES = {p.name: json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))
         if p.name not in ("index.json", "recent.json")}
# (family, key): why our value differs from the published one and computes the same model
SAME_MODEL = {
    ("ernie4_5_moe", "moe_layer_end_index"): "-1 is transformers' spelling of 'up to the last layer'",
    ("exaone4", "sliding_window_pattern"): "layer_types says which layers slide; transformers reads the pattern only "
                                           "without it",
    ("gemma", "hidden_act"): "transformers reads Gemma's legacy 'gelu' as gelu_pytorch_tanh, which we write",
    ("qwen2", "sliding_window"): "use_sliding_window is false: transformers ignores the window",
    ("qwen2", "max_window_layers"): "use_sliding_window is false: transformers ignores it",
    ("qwen3", "max_window_layers"): "use_sliding_window is false: transformers ignores it",
    ("smollm3", "pad_token_id"): "the class's default id would not fit a smaller vocabulary (hf_recent_export.py)",
}


def _exact(name: str) -> bool:
    d = FILES[name]
    if d.get("model_type") not in _WRITERS:
        return False
    try:
        return hf_problems(from_hf_config(d), d["model_type"])[1] == []
    except Exception:   # a file we do not import (tests/test_import_refusals_*.py hold why)
        return False


EXACT = [name for name in FILES if _exact(name)]


def test_most_published_files_are_written_back_exactly():
    assert len(EXACT) >= 70


@pytest.mark.parametrize("name", EXACT)
def test_a_published_file_is_written_back_with_its_own_values(name):
    d = FILES[name]
    family = d["model_type"]
    out = hf_problems(from_hf_config(d), family)[0]
    differ = {k: (d[k], v) for k, v in out.items() if k in d and d[k] != v and (family, k) not in SAME_MODEL}
    assert differ == {}
