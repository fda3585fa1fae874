"""Per-layer attention windows as config fields (hf_reader.windows_to_fields, _layer_windows): the exact fields
returned, each of which rebuilds the same per-layer windows in ModelConfig. Pure stdlib."""
import pytest

from engine.config import ModelConfig
from engine.interop.hf_reader import _layer_windows, _Reader, windows_to_fields


@pytest.mark.parametrize("windows,fields", [
    ([None, None], dict(attn_window=None, global_every=None)),
    ([8, 8, 8], dict(attn_window=8, global_every=None)),
    ([8, None, 8, None], dict(attn_window=8, global_every=2)),
    ([8, 8, None, 8, 8, None, 8], dict(attn_window=8, global_every=3)),
    ([8, None, None, 8], dict(attn_window=8, global_every=None, layer_types=("sliding", "full", "full", "sliding"))),
])
def test_windows_become_exact_fields_that_rebuild_them(windows, fields):
    assert windows_to_fields(windows) == fields
    cfg = ModelConfig.from_dict({"n_layers": len(windows), **fields})
    assert cfg.layer_windows == windows


def test_bad_layer_types_are_one_problem_and_no_windows():
    r = _Reader({"layer_types": ["sliding_attention", "local"]}, "gemma2")
    assert _layer_windows(r, 2, 8, ["sliding_attention", "full_attention"]) == dict(attn_window=None,
                                                                                      global_every=None)
    assert r.problems == ["layer_types: ['sliding_attention', 'local'] is not expressible "
                          "(2 entries of sliding_attention / full_attention)"]
