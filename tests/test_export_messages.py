"""Every refusal of the Hugging Face writers, word for word, and what each writes where it refuses nothing: each
family, on each config it is held on (tests/export_cases.py SOURCES, all exact), is tried with every single-field
change of export_cases.CHANGES.
  refused: the full list of problems is a reviewed text (tests/golden/export_messages.json);
  written: the config.json differs from the unchanged config's and reads back with the change (a key dropped or
           misspelt reads as the default, a wrong value as itself);
  not written: the config.json is the unchanged config's (the field means nothing to this family here).
Which changes are written and which are not is reviewed too, so a refusal or a key that goes missing fails."""
import pytest

from engine.config import ModelConfig
from engine.interop import from_hf_config
from engine.interop.hf_export import _WRITERS, hf_problems
from tests.export_cases import CASES, CHANGES, SOURCES, changed, source
from tests.golden import check_golden


def meaning(cfg: ModelConfig, field: str):
    """What a field means for the model, where one model has several spellings (a kv-head count equal to the
    heads or None, layer_types of all-sliding or None, moe_every or ffn_types, ...)."""
    if field in ("n_kv_heads", "head_dim"):
        return cfg.kv_heads, cfg.head_width
    if field in ("layer_types", "global_every", "attn_window"):
        return [s.mixers for s in cfg.layer_specs], cfg.layer_windows
    if field in ("ffn_types", "moe_every", "moe_first_dense"):
        return [s.ffn for s in cfg.layer_specs]
    if field == "rope_local_base":   # rotates only the sliding layers
        return cfg.rope_local_base if any(w is not None for w in cfg.layer_windows) else None
    return getattr(cfg, field)


def test_every_writer_is_held_on_some_config():
    assert set(SOURCES) == set(_WRITERS)


@pytest.mark.parametrize("family,name", CASES)
def test_each_change_is_refused_field_by_field_or_written(family, name):
    cfg = source(name)
    base, problems = hf_problems(cfg, family)
    assert problems == []
    written, not_written = [], []
    for label in CHANGES:
        other = changed(cfg, label)
        if other is None:
            continue
        out, problems = hf_problems(other, family)
        if problems:
            check_golden("export_messages", f"{family} <- {name}: {label}", problems)
            continue
        if out == base:
            not_written.append(label)
            continue
        written.append(label)
        back = from_hf_config({"model_type": family, **out})
        for field in (k for k in CHANGES[label](cfg) if getattr(other, k) != getattr(cfg, k)):
            assert meaning(back, field) == meaning(other, field), (label, field)
    check_golden("export_messages", f"{family} <- {name}: written", written)
    check_golden("export_messages", f"{family} <- {name}: not written", not_written)
