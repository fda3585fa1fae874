"""The keys each family's importer accepts without reading, and why (tests/golden/import_ignored.json, reviewed).

`import-hf --verbose` lists every key a config.json holds that transformers does not read for that model either,
with the reason; a key it would read is never dropped silently, and a key no reader knows is refused as unknown.
Per family (its first published config in tests/data/hf_configs, else a bare one, and a few variants that reach
readers' other branches), every key the reader looks at and every key of the shared IGNORED table is put into
the file alone, with values published configs use; the keys then listed as ignored are put in together, and
that import's list, (key, reason) word for word, is the reviewed spec. Listed apart: the keys the reader looks at
but refuses as unknown (Jamba has no RoPE: its rope keys), and the IGNORED keys it does not ignore with the
shared reason (it reads them, or has its own reason). The shared reasons are held once, by the last test.

Which keys a reader looks at is recorded while it runs (every lookup in its dict), not read from the source.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine.config import ConfigError
from engine.interop import hf_config, hf_reader
from engine.interop.hf_config import import_hf
from engine.interop.hf_defaults import IGNORED
from engine.interop.hf_wrappers import WRAPPERS
from tests.golden import GOLDEN as GOLDEN_DIR, check_golden

DATA = Path(__file__).parent / "data" / "hf_configs"
GOLDEN = "import_ignored"
PUBLISHED = {p.name: json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))
             if p.name not in ("index.json", "recent.json")}
ROPE_MAPS = ("rope_parameters", "rope_scaling")
FALLBACK = 7   # a value for a key no published config has (a size no reader derives)


def _text(d: dict[str, Any]) -> dict[str, Any]:
    """The language model's keys: a multimodal file's text_config, else the file."""
    return d["text_config"] if d.get("model_type") in WRAPPERS and isinstance(d.get("text_config"), dict) else d


def _values() -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Up to three values per key as published configs write them, top level and inside the RoPE mappings."""
    top: dict[str, list[Any]] = {}
    rope: dict[str, list[Any]] = {}
    for d in PUBLISHED.values():
        for text in {id(d): d, id(_text(d)): _text(d)}.values():
            for key, value in text.items():
                seen = top.setdefault(key, [])
                if value not in seen and len(seen) < 3:
                    seen.append(value)
                if key in ROPE_MAPS and isinstance(value, dict):
                    for k, v in value.items():
                        if v not in rope.setdefault(k, []) and len(rope[k]) < 3:
                            rope[k].append(v)
    return top, rope


VALUES, ROPE_VALUES = _values()


def _family(d: dict[str, Any]) -> str:
    family = d.get("model_type")
    if family in WRAPPERS:
        family = _text(d).get("model_type") or WRAPPERS[family].text_type
        return "deepseek_v3" if family == "kimi_k2" else family   # Kimi K2.5's text model is read as DeepSeek-V3
    return family


def _cases() -> Iterator[tuple[str, dict[str, Any]]]:
    """(case, config): per reader family its first published config, else a bare one; then the variants."""
    for family in hf_config._READERS:
        if family == "deepseek_v4":   # refused field by field: it never imports
            continue
        name = next((n for n, d in PUBLISHED.items() if _family(d) == family), None)
        yield (f"{family} ({name})", PUBLISHED[name]) if name else (f"{family} (bare)", {"model_type": family})
    # every layer dense: DeepSeek-V3's prediction modules would be MoE, with no expert sizes to count
    yield "deepseek_v3 (all layers dense)", dict(model_type="deepseek_v3", num_hidden_layers=2,
                                                  first_k_dense_replace=2, num_nextn_predict_layers=1)
    yield "deepseek_v3 (kimi_k25 wrapper)", dict(model_type="kimi_k25", tie_word_embeddings=False,
                                                  text_config=dict(model_type="kimi_k2", tie_word_embeddings=True))
    # mlp_layer_types (three dense layers) over a first_k_dense_replace that says otherwise
    yield "glm_moe_dsa (glm-5.json, first_k_dense_replace 1)", dict(PUBLISHED["glm-5.json"], first_k_dense_replace=1)
    # the copy of max_position_embeddings Ministral3Config writes into its rope_parameters
    mistral3 = json.loads(json.dumps(PUBLISHED["ministral-3-3b-instruct-2512.json"]))
    text = mistral3["text_config"]
    text["rope_parameters"]["max_position_embeddings"] = text["max_position_embeddings"]
    yield "ministral3 (rope_parameters.max_position_embeddings)", mistral3
    # Ministral3Config's own RoPE when the file has none: nothing listed about keys the file does not have
    yield "ministral3 (bare)", dict(model_type="ministral3")
    yield "llama4_text (llama4 wrapper)", dict(model_type="llama4", tie_word_embeddings=False, text_config={})


CASES = dict(_cases())


class _Looked(dict):
    """A reader's dict that records every key looked up."""
    keys: set[str] = set()

    def __contains__(self, key: object) -> bool:
        _Looked.keys.add(str(key))
        return dict.__contains__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        _Looked.keys.add(key)
        return dict.get(self, key, default)

    def __getitem__(self, key: str) -> Any:
        _Looked.keys.add(key)
        return dict.__getitem__(self, key)


@pytest.fixture
def looked(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The keys the readers look up from now on (each dict a reader is given or sets is recorded)."""
    _Looked.keys = set()
    monkeypatch.setattr(hf_reader._Reader, "d", property(lambda r: r.__dict__["d"],
                                                         lambda r, d: r.__dict__.__setitem__("d", _Looked(d))),
                        raising=False)
    return _Looked.keys


def _with(d: dict[str, Any], key: str, value: Any, rope: str | None = None) -> dict[str, Any]:
    d = json.loads(json.dumps(d))
    text = _text(d)
    if rope is None:
        text[key] = value
    else:
        text[rope][key] = value
    return d


def _split(line: str) -> list[str]:
    key, _, why = line.partition(": ")
    return [key, why]


def _generic(line: str) -> bool:
    """A line giving the shared IGNORED reason for its key."""
    key, why = _split(line)
    return IGNORED.get(key.removeprefix("text_config.")) == why


@pytest.mark.parametrize("case", CASES)
def test_keys_a_family_accepts_unread_are_listed_with_their_reason(case: str, looked: set[str]) -> None:
    base = CASES[case]
    where = "text_config." if base.get("model_type") in WRAPPERS else ""
    before = import_hf(json.loads(json.dumps(base))).ignored
    text = _text(base)
    added: list[tuple[str, Any, str | None]] = []   # (key, value, RoPE mapping or None) listed as ignored
    unknown = []
    tries = [(k, None) for k in sorted((looked | set(IGNORED)) - set(text))]
    rope = next((m for m in ROPE_MAPS if isinstance(text.get(m), dict)), None)
    if rope:
        tries += [(k, rope) for k in sorted(set(ROPE_VALUES) - set(text[rope]))]
    for key, mapping in tries:
        path = where + (f"{mapping}.{key}" if mapping else key)
        for value in (ROPE_VALUES if mapping else VALUES).get(key, []) + [FALLBACK]:
            try:
                got = import_hf(_with(base, key, value, mapping)).ignored
            except ConfigError as e:
                if f"{path}: unknown {_family(base)} config key; refusing to guess what it changes" in e.problems:
                    unknown.append(path)
                    break
                continue
            if any(line.startswith(path + ": ") for line in got if line not in before):
                added.append((key, value, mapping))
                break
    every = json.loads(json.dumps(base))
    for key, value, mapping in added:
        every = _with(every, key, value, mapping)
    ignored = import_hf(every).ignored   # all of them at once: each still listed, none refused
    assert len(ignored) == len(set(ignored)), ignored
    assert len(ignored) == len(before) + len(added), "\n".join(ignored)
    generic = {_split(line)[0].removeprefix("text_config.") for line in ignored if _generic(line)}
    check_golden(GOLDEN, case, dict(
        ignored=dict(sorted(_split(line) for line in ignored if not _generic(line))),
        unknown_though_looked_up=sorted(unknown),
        not_ignored_for_the_shared_reason=sorted(set(IGNORED) - generic)))


def test_the_shared_reasons() -> None:
    """Each IGNORED key's reason, as `import-hf --verbose` prints it for a family that does not read the key (GPT-2
    or Llama: each reads some of them)."""
    lines: dict[str, str] = {}
    for key in IGNORED:
        for family in ("gpt2", "llama"):
            got = import_hf({"model_type": family, key: VALUES.get(key, [FALLBACK])[0]}).ignored
            if got and key not in lines:
                assert len(got) == 1, got
                lines.update([_split(got[0])])
    check_golden(GOLDEN, "shared reasons", dict(sorted(lines.items())))


def test_every_family_the_importer_reads_is_held() -> None:
    """A family dropped from the readers (or a case no longer built) leaves its reviewed entry behind: fail."""
    if os.environ.get("UPDATE_GOLDEN"):
        pytest.skip("the file is being written")
    stored = json.loads((GOLDEN_DIR / f"{GOLDEN}.json").read_text())
    assert set(stored) == set(CASES) | {"shared reasons"}
