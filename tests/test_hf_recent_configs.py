"""Published config.json files of 2025-26 models (issue #24; tests/data/hf_configs/recent.json, sources there and in
SOURCES.md): each one imports with transformers' exact total (and, for a mixture of experts, active) count of the
language model, or is refused naming the key and the reason engine/interop/hf_refused.py gives for its family
(hybrid and sparse-attention families whose readers are not built yet). Files are read as import-hf reads them:
Python's json, NaN and Infinity included (NVIDIA's Nemotron carries time_step_limit [0.0, Infinity]).

`hf_params` / `hf_active` are transformers 5.24's meta-device counts of each file's language model
(tests/helpers.py hf_language_counts); test_stored_counts_are_transformers_counts re-derives every one.
"""
import json
from pathlib import Path

import pytest

from engine.budget.params import count_params
from engine.config import ConfigError
from engine.interop.hf_config import import_hf
from engine.interop.hf_refused import REFUSED
from engine.interop.hf_wrappers import WRAPPERS
from engine.limits import InputError, json_loads

DATA = Path(__file__).parent / "data" / "hf_configs"
INDEX = json.loads((DATA / "recent.json").read_text())


def _load(name: str) -> dict:
    return json_loads((DATA / name).read_text(), name, constants=True)


def _family(d: dict) -> str:
    """The family a file's language model belongs to (a multimodal file's text_config's)."""
    if d["model_type"] in WRAPPERS:
        return (d.get("text_config") or {}).get("model_type") or WRAPPERS[d["model_type"]].text_type
    return d["model_type"]


def _outcome(name: str) -> tuple[str, str]:
    """("exact", "") when the total (and active) equal transformers', ("refused", first problem) or ("wrong", why)."""
    meta = INDEX[name]
    try:
        got = import_hf(_load(name))
    except ConfigError as e:
        return "refused", e.problems[0]
    counts = count_params(got.config)
    active = counts.active if got.config.n_experts is not None else None
    if (counts.total, active) == (meta["hf_params"], meta["hf_active"]):
        return "exact", ""
    return "wrong", f"{counts.total:,} / {active} vs transformers {meta['hf_params']:,} / {meta['hf_active']}"


def test_the_collection_is_large_dated_and_sourced():
    assert len(INDEX) >= 30
    for name, meta in INDEX.items():
        assert (DATA / name).is_file() and meta["source"].startswith("https://"), name
        assert meta["released"] >= "2025-01" and meta["copy"] in ("verbatim", "reconstructed")
        assert _load(name)["model_type"] == meta["model_type"]


@pytest.mark.parametrize("name", sorted(INDEX))
def test_imports_exactly_or_is_refused_by_name(name):
    """Exact, or refused for its family's stated reason, naming the key (text_config.<key> inside a wrapper)."""
    outcome, detail = _outcome(name)
    if outcome == "refused":
        family = _family(_load(name))
        assert family in REFUSED, detail
        key, reason = REFUSED[family]
        assert detail.split(": ", 1)[0].removeprefix("text_config.") == key and reason in detail, detail
    else:
        assert outcome == "exact", detail


def test_coverage():
    """Of the files whose family we build (or refuse for its own reasons), at least 90% are exact; the rest of the
    collection waits for the hybrid readers (issue #23) and is refused."""
    pending = {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "nemotron_h", "granitemoehybrid", "kimi_linear",
               "lfm2", "lfm2_moe"}
    ours = [n for n in INDEX if _family(_load(n)) not in pending or _outcome(n)[0] == "exact"]
    exact = sum(_outcome(n)[0] == "exact" for n in ours)
    assert exact / len(ours) >= 0.9, (exact, len(ours))


def test_a_nemotron_file_with_infinity_is_read():
    """time_step_limit [0.0, Infinity] is read as Python's json reads it; only the strict reading refuses it."""
    text = (DATA / "nvidia-nemotron-nano-9b-v2.json").read_text()
    with pytest.raises(InputError, match="Infinity"):
        json_loads(text, "config.json")
    assert json_loads(text, "config.json", constants=True)["time_step_limit"] == [0.0, float("inf")]


@pytest.mark.parametrize("name", sorted(n for n in INDEX if INDEX[n]["hf_params"] is not None))
def test_stored_counts_are_transformers_counts(name):
    pytest.importorskip("transformers", minversion="5.0")
    from tests.hf_checks import hf_language_counts
    assert hf_language_counts(_load(name)) == (INDEX[name]["hf_params"], INDEX[name]["hf_active"])


@pytest.mark.parametrize("preset,name", [("gemma-3-27b", "gemma-3-27b-it.json"),
                                         ("llama-4-scout-17b-16e", "llama-4-scout-17b-16e.json"),
                                         ("smollm3-3b", "smollm3-3b-base.json"), ("glm-4.5-air", "glm-4.5-air.json"),
                                         ("olmo-3-7b", "olmo-3-7b.json"),
                                         ("ministral-3-3b", "ministral-3-3b-instruct-2512.json")])
def test_presets_are_the_published_configs(preset, name):
    """Each 2025-26 preset, written by hand, is what importing its published config.json gives (name aside) and
    counts what transformers counts (total, and active for a mixture of experts; test_stored_counts_are_...
    re-derives those from transformers)."""
    from engine.presets import PRESETS
    cfg = import_hf(_load(name)).config
    assert PRESETS[preset].config == cfg.replace(name=preset)
    counts = count_params(cfg)
    assert PRESETS[preset].reference_params == counts.total == INDEX[name]["hf_params"]
    assert (counts.active if cfg.n_experts else None) == INDEX[name]["hf_active"]


MULTIMODAL = [n for n in sorted(INDEX) if (d := _load(n))["model_type"] in WRAPPERS and _family(d) not in REFUSED]


@pytest.mark.parametrize("name", MULTIMODAL)
def test_a_multimodal_file_names_each_tower_it_leaves_uncounted(name):
    """The notes import-hf prints: "# source" says the YAML is the text_config (of its text family), and "# not
    counted" has one line per other modality's sub-config the file has (vision_config, audio_config), read from
    the file itself, never an empty list for a file that has one."""
    d = _load(name)
    towers = sorted(k for k, v in d.items() if k.endswith("_config") and k != "text_config" and v is not None)
    got = import_hf(d)
    assert towers and got.not_counted == [f"{k}: the {k.removesuffix('_config')} tower and its projector (not part "
                                          f"of the language model)" for k in towers]
    assert got.family == _family(d) and got.source == (
        f"{d['model_type']} multimodal config.json: the language model is its text_config ({got.family}); vision "
        f"weights are not counted")
