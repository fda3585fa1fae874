"""Every importer's defaults against transformers' own, for every key it reads, at published shapes.

A default can be right at the config class's own sizes and wrong anywhere else: a head_dim fixed at 128 where
transformers derives hidden_size / heads, an FFN width fixed where it is 4 * hidden, a kv-head count fixed where
it follows the query heads. So each check starts from a published config.json (tests/data/hf_configs, sources
in its index; bloom-560m, falcon-7b and falcon-40b below) and leaves out one key at a time: our import of what is left must
equal our import of transformers' completion of it (AutoConfig.for_model(...).to_dict(): every missing key filled
in by transformers 5 from the realistic values around it). The keys left out are every key the file carries that
changes the forward pass; the keys it does not carry are already missing, and the first check covers them.
Where transformers' completion keeps the key null (the model derives it: GPT-2's n_inner = 4 * n_embd, a kv-head
count that follows the query heads, a head_dim of hidden / heads), both sides would go through our reading of
null, so there the reference is transformers' model itself: its parameter count on the meta device.
The files index.json does not list (recent.json's 2025-26 collection and a few more) are held the same way, one
file per family the listed ones do not reach, a multimodal file's text_config keys included."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.budget.params import count_params
from engine.config import ConfigError
from engine.interop import FAMILIES, from_hf_config
from engine.interop.hf_defaults import INERT
from engine.interop.hf_dsa import BUILT_AS
from engine.limits import json_loads
from tests.hf_checks import hf_language_counts, hf_meta

transformers = pytest.importorskip("transformers", minversion="5.0")
# slow (not in `make test-fast`): ~35 CPU-s of transformers config classes and meta models; an importer's default
# moves only with its family's reader, whose own tests (test_interop*.py) stay in the inner loop
pytestmark = pytest.mark.slow

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
    # https://huggingface.co/tiiuae/falcon-40b/blob/main/config.json (RefinedWeb's n_head 128, n_head_kv 8, n_layer
    # 60 under transformers' names): the new decoder architecture, grouped kv heads, two norms per parallel block
    "falcon-40b": {"model_type": "falcon", "alibi": False, "apply_residual_connection_post_layernorm": False,
                   "attention_dropout": 0.0, "bias": False, "hidden_dropout": 0.0, "hidden_size": 8192,
                   "layer_norm_epsilon": 1e-05, "new_decoder_architecture": True, "num_attention_heads": 128,
                   "num_hidden_layers": 60, "num_kv_heads": 8, "parallel_attn": True, "vocab_size": 65024},
}
# the files of index.json (the 2025-26 collection of recent.json is held by its exact counts instead:
# tests/test_hf_recent_configs.py)
INDEX = json.loads((DATA / "index.json").read_text())
PUBLISHED = {Path(name).stem: json.loads((DATA / name).read_text()) for name in sorted(INDEX)}
PUBLISHED.update(EXTRA)
FILES = [json.loads(p.read_text()) for p in DATA.glob("*.json") if p.name not in ("index.json", "recent.json")]
ANYWHERE = {d["model_type"] for d in FILES} | {d["text_config"].get("model_type") for d in FILES
                                                if isinstance(d.get("text_config"), dict)}
# families with no published config.json here: parity tests against transformers hold them (bloom and falcon
# at published shapes through EXTRA below; qwen3_5_text through its multimodal file's text_config)
NO_FILE = {"bamba", "falcon_h1", "kimi_k25", "qwen3_5_text"}


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
    assert set(FAMILIES) - ANYWHERE - {d["model_type"] for d in PUBLISHED.values()} == NO_FILE


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


# ---- the files index.json does not list (the 2025-26 collection of recent.json and a few others) -----------------
# one file per language-model family the published configs above do not reach, the smallest; a multimodal file's
# text_config keys are left out one at a time too
def _family(d: dict) -> tuple:
    text = d.get("text_config")
    return d["model_type"], text.get("model_type") if isinstance(text, dict) else None


REACHED = {_family(d) for d in PUBLISHED.values()}
OTHERS: dict[str, dict] = {}
for _path in sorted(DATA.glob("*.json"), key=lambda p: (p.stat().st_size, p.name)):
    if _path.name not in INDEX and _path.name not in ("index.json", "recent.json"):
        _d = json_loads(_path.read_text(), _path.name, constants=True)     # NVIDIA's files carry Infinity
        if _family(_d) not in REACHED | {_family(o) for o in OTHERS.values()}:
            OTHERS[_path.stem] = _d
ROPE = {"rope_theta", "rope_scaling"}   # transformers 5 moves them into rope_parameters; they hold no parameters
# where our reading of a missing key knowingly differs from transformers' completion, and why
KNOWN = {("kimi-k2-instruct", "num_key_value_heads"):
         "DeepseekV3Config fills 128 whatever the heads; MLA never reads it (transformers' sdpa path builds the "
         "same model, its eager path breaks on 64 // 128 = 0 groups), so a file without it reads as all heads while "
         "an explicit 128 with 64 heads is refused"}


def _completed(d: dict) -> dict | None:
    built_as = BUILT_AS.get(d["model_type"], d["model_type"])
    return completed({**d, "model_type": built_as})


def _without(d: dict, path: str) -> dict:
    outer, _, key = path.rpartition(".")
    if not outer:
        return {k: v for k, v in d.items() if k != key}
    return {**d, outer: {k: v for k, v in d[outer].items() if k != key}}


def _value(d: dict | None, path: str):
    for part in path.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def test_the_other_files_reach_every_family_the_published_ones_do_not():
    families = {_family(json_loads(p.read_text(), p.name, constants=True)) for p in DATA.glob("*.json")
                if p.name not in ("index.json", "recent.json")}
    assert families - REACHED == {_family(d) for d in OTHERS.values()}
    assert len(OTHERS) >= 20


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_each_key_left_out_of_a_recent_file_reads_as_transformers_default(name):
    d = OTHERS[name]
    whole = _completed(d)
    assert whole is not None and ours(d) == ours({**whole, "model_type": d["model_type"]})
    counts: dict[str, int] = {}     # transformers' count of d: the same model wherever it completes alike
    keys = [k for k in d if k not in INERT and k != "text_config"]
    if isinstance(d.get("text_config"), dict):
        keys += [f"text_config.{k}" for k in d["text_config"] if k not in INERT]
    checked = []
    for key in sorted(keys):
        partial = _without(d, key)
        full = _completed(partial)
        if full is None or (name, key) in KNOWN:
            continue
        mine, theirs = ours(partial), ours({**full, "model_type": d["model_type"]})
        if isinstance(mine, tuple) and isinstance(theirs, tuple):
            continue
        assert mine == theirs, (key, mine if isinstance(mine, tuple) else "", theirs if isinstance(theirs, tuple) else "")
        if _value(full, key) is None and not isinstance(mine, tuple) and key.rpartition(".")[2] not in ROPE:
            try:                                        # derived (or never read) by transformers' model
                if full == whole:
                    hf = counts.get("d") or counts.setdefault("d", hf_language_counts(d)[0])
                else:
                    hf = hf_language_counts(partial)[0]
            except (TypeError, ValueError):             # transformers cannot build the model without it either
                continue
            assert count_params(mine).total == hf, key
        checked.append(key)
    assert len(checked) >= len(keys) // 2 or isinstance(ours(d), tuple), checked
