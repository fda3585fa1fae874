"""Bounds on everything read from outside, in one place: the app and the CLI apply the same limits.

Each reader here refuses oversized or over-deep input with a message naming the file or field and the limit,
before anything large is built: a config file is read at most MAX_CONFIG_BYTES (so /dev/zero ends), YAML and
JSON nesting is checked iteratively before a recursive parser sees it, and duplicate YAML keys are refused.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

MAX_INT = 2**53 - 1              # the largest integer a browser number box or a JSON double holds exactly
MAX_LAYERS = 100_000             # budgets, the diagram and the windows walk the layers one by one
MAX_CONFIG_BYTES = 64 * 1024       # a YAML config or a config.json; real ones are a few KiB
MAX_DATA_BYTES = 64 * 1024 * 1024   # a training text file (the whole file becomes one token tensor)
MAX_DEPTH = 32                   # nesting of YAML and JSON; a model config is 1 (config.json: 3)
MAX_INT_DIGITS = 400             # longer integer literals are refused before int() converts them


class InputError(ValueError):
    """Input that exceeds a limit or cannot be parsed; the message names the file or field."""


def read_bounded(path: str | Path, limit: int, what: str) -> bytes:
    """At most `limit` bytes of `path`; more (a huge file, /dev/zero, a FIFO that never ends) is refused."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise InputError(f"{what}: cannot read {path}: {e.strerror or e}") from None
    if len(data) > limit:
        raise InputError(f"{what}: {path} is larger than the limit of {limit:,} bytes")
    return data


def read_text(path: str | Path, limit: int, what: str) -> str:
    """`read_bounded` decoded as UTF-8."""
    data = read_bounded(path, limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{what}: cannot read {path}: not UTF-8 text (byte {e.start:,} cannot be "
                         f"decoded)") from None


def json_depth(text: str) -> int:
    """Deepest [ / { nesting of a JSON text, scanned without recursion (strings skipped)."""
    depth = deepest = 0
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif tok in "]}":
            depth -= 1
    return deepest


def _json_int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_INT_DIGITS:
        raise InputError(f"a {len(s):,}-digit integer (at most {MAX_INT_DIGITS} digits)")
    return int(s)


def _json_constant(s: str) -> Any:
    raise InputError(f"{s} is not a JSON number (only finite numbers are allowed)")


def json_loads(text: str, what: str, constants: bool = False) -> Any:
    """JSON with bounded nesting and integer length; InputError names `what`. NaN, Infinity and -Infinity are
    refused unless `constants` (a config.json, read as Python's json and transformers read it: a published
    Nemotron-H config carries Infinity); then, like a float literal beyond the double range (inf), the caller's
    type check names any key whose number must be finite (see interop/hf_types.py)."""
    if (depth := json_depth(text)) > MAX_DEPTH:
        raise InputError(f"{what}: nested {depth:,} levels deep; at most {MAX_DEPTH} are allowed")
    try:
        return json.loads(text, parse_int=_json_int, parse_constant=float if constants else _json_constant)
    except InputError as e:
        raise InputError(f"{what}: {e}") from None
    except ValueError as e:
        raise InputError(f"{what}: cannot read it: not valid JSON ({e})") from None


class RefusedYAML(yaml.constructor.ConstructorError):
    """Valid YAML that a config must not contain (a duplicate key, an over-long integer)."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice (the second would silently win) and over-long integers."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                dup = key in seen
                seen.add(key)
            except TypeError:   # an unhashable key ([a, b]: 1): let SafeLoader report it
                break
            if dup:
                raise RefusedYAML(
                    None, None, f"duplicate key `{key}` (given twice; remove one)", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        if len(node.value) > MAX_INT_DIGITS:
            raise RefusedYAML(
                None, None, f"a {len(node.value):,}-digit integer (at most {MAX_INT_DIGITS} digits)",
                node.start_mark)
        return super().construct_yaml_int(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def yaml_depth(text: str) -> int:
    """Deepest collection nesting of a YAML text, from the parser's event stream (a state machine, not
    recursion), so a 1,200-level document is measured without exhausting the stack."""
    depth = deepest = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return deepest


def yaml_load(text: str) -> Any:
    """yaml.safe_load with a size and depth limit and duplicate keys refused (YAMLError or InputError)."""
    if len(text) > MAX_CONFIG_BYTES:
        raise InputError(f"yaml: the text is {len(text):,} characters; at most {MAX_CONFIG_BYTES:,} are allowed")
    if yaml_depth(text) > MAX_DEPTH:
        raise InputError(f"yaml: nested more than {MAX_DEPTH} levels deep; a config is a flat mapping "
                         f"such as `d_model: 768`")
    return yaml.load(text, Loader=_Loader)
