"""Reviewed texts a user reads (refusal messages, formulas, labels, notes), held in tests/golden/<file>.json.

A test passes its text with a key; a changed text fails with the reviewed one and the new one side by side. After
reading the new text, `UPDATE_GOLDEN=1 .venv/bin/python -m pytest -n 0 tests/test_<file>.py` stores it (run the
whole file: a key no test writes any more is dropped only by deleting the file and writing it again)."""
from __future__ import annotations

import atexit
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "golden"
_updated: dict[str, dict[str, Any]] = {}   # UPDATE_GOLDEN: each file's texts, written once when the run ends


@atexit.register
def _write_updated() -> None:
    for file, texts in _updated.items():
        (GOLDEN / f"{file}.json").write_text(json.dumps(texts, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


@lru_cache(maxsize=None)
def _stored(file: str) -> dict[str, Any]:
    path = GOLDEN / f"{file}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def check_golden(file: str, key: str, value: Any) -> None:
    """value (anything JSON holds; tuples become lists) equals the reviewed value stored under key."""
    value = json.loads(json.dumps(value))
    if os.environ.get("UPDATE_GOLDEN"):
        if file not in _updated:
            _updated[file] = dict(_stored(file))
        _updated[file][key] = value
        return
    stored = _stored(file)
    assert key in stored, f"{key}: no reviewed text in tests/golden/{file}.json (UPDATE_GOLDEN=1 writes it)"
    assert value == stored[key], f"{key} changed:\nreviewed: {stored[key]!r}\nnow:      {value!r}"
