"""Published config.json files (tests/data/hf_configs) and the typos a user makes in them: shared by the import
message tests (test_import_messages, test_import_golden, test_import_refusals_a, test_import_values)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine.config import ConfigError
from engine.interop.hf_config import import_hf

DATA = Path(__file__).parent / "data" / "hf_configs"
KeyPath = tuple[str, ...]   # a key path; tuples, since a key may itself contain a dot (transformers.js_config)


def leaves(d: dict[str, Any], above: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    for key, value in d.items():
        if isinstance(value, dict):
            yield from leaves(value, above + (key,))
        else:
            yield above + (key,), value


def typos(v: Any) -> list[Any]:
    """What a slip of the user's would make of a value: a negative or off-by-one size, a wrong number, a word
    where a setting belongs, a flag flipped, a list one entry short."""
    if isinstance(v, bool):
        return [not v]
    if isinstance(v, int):
        return [-1, v + 1]
    if isinstance(v, float):
        return [-1.0]
    if v is None or isinstance(v, str):
        return ["no-such-value"]
    if isinstance(v, list) and v and not isinstance(v[0], (dict, list)):
        return [v[:-1]]
    return []


def _key_paths(d: dict[str, Any], above: str = "") -> set[str]:
    """Every key path of d as a message writes it, mappings included (rope_scaling, rope_scaling.factor)."""
    paths = set()
    for key, value in d.items():
        paths.add(above + key)
        if isinstance(value, dict):
            paths |= _key_paths(value, f"{above}{key}.")
    return paths


def _at(d: dict[str, Any], dotted: str) -> Any:
    for key in dotted.split("."):
        d = d.get(key) if isinstance(d, dict) else None
    return d


def changed(text: str, path: KeyPath, value: Any) -> dict[str, Any]:
    d = json.loads(text)   # parsed afresh: nothing one import does can leak into the next
    inner = d
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    return d


def wrong_names(d: dict[str, Any], path: KeyPath, value: Any, problems: list[str]) -> list[str]:
    """What is wrong with import_hf's problems with d, the file with `path` set to `value` (nothing: [])."""
    keys, where = _key_paths(d), ".".join(path)
    wrong = []
    for problem in problems:
        head, _, rest = problem.partition(": ")
        if head != "config.json" and head not in keys:
            wrong.append(f"{where} = {value!r}: names what the file does not have: {problem}")
        # a -1 refused is reported at the key holding it (unless the key named holds -1 of its own)
        elif value == -1 and rest.startswith(("-1 ", "-1.0 ")) and head != where and _at(d, head) != -1:
            wrong.append(f"{where} = {value!r}: refused at another key: {problem}")
    return wrong


def published(name: str) -> dict[str, Any]:
    """A published config.json, parsed afresh."""
    return json.loads((DATA / name).read_text())


def refusal(d: dict[str, Any]) -> list[str]:
    """import_hf's problems with d, which it must refuse."""
    with pytest.raises(ConfigError) as e:
        import_hf(d)
    return e.value.problems
