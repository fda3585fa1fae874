"""Validation pieces shared by the config and every engine entry point, with one message shape:
"name: value is not <allowed>" (the config's), so a bad argument reads the same wherever it is caught.

A field is declared once, with `declare` inside its family's `Knobs` dataclass (engine/layers/*.py; the model-wide
sizes and output head in engine/config.py, which assembles them all into ModelConfig); FieldSpec is the declaration
as data, and its checks and the conversion of raw values (YAML, URL, CLI strings) live here.
"""
from __future__ import annotations

import dataclasses
import math
import reprlib
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Iterable


class ConfigError(ValueError):
    """One or more invalid config values; `problems` holds one message per problem, each naming its field."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict = 1, 4, 4   # [[...], [...], ...]; strings and ints cut at 30, 40


def shown(value: Any) -> str:
    """A bounded repr for messages: a 100,000-character URL value or a YAML alias bomb (nested lists whose full
    repr is billions of items) must not be echoed whole, or hang the process building the message."""
    return _SHORT.repr(value)


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def parse_bool(text: str) -> bool | None:
    """'true'/'1'/'yes'/'on' -> True, 'false'/'0'/'no'/'off' -> False (any case, spaces ignored), else None."""
    word = text.strip().lower()
    return True if word in _TRUE else False if word in _FALSE else None


def declare(default: Any, group: str, help: str, *, choices: tuple | None = None, lo: float | None = None,
            hi: float | None = None, lo_open: bool = False, hi_open: bool = False, null: str | None = None) -> Any:
    """Declare a config field: default, UI group, help text, allowed values (choices or [lo, hi] range; *_open
    excludes the bound) and, for optional fields, what null means. A list-valued field (typed tuple[T, ...])
    applies choices and range to each item."""
    meta = dict(group=group, help=help, choices=choices, lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open, null=null)
    return field(default=default, metadata=meta)


class Knobs:
    """Base of a family's declared fields (a frozen dataclass of `declare`d fields, with its derived values).
    `rules` lists the problems tying the family's fields together, each naming a field; `ok(*names)` is false
    when one of the named fields already has its own problem (so a rule never builds on an invalid value), and
    raises KeyError for a name that is no declared field."""

    @staticmethod
    def rules(c: Any, ok: Callable[..., bool]) -> list[str]:
        return []


@dataclass(frozen=True)
class FieldSpec:
    """One field's declaration, as the editor, CLI and validation read it."""
    name: str
    type: type            # int, float, bool, str, or tuple for a list-valued field
    optional: bool        # None allowed
    default: Any
    group: str
    help: str
    choices: tuple | None
    lo: float | None
    hi: float | None
    lo_open: bool
    hi_open: bool
    null: str | None
    item: type | None = None   # a list field's item type (int, float or str)

    def allowed(self) -> str:
        if self.item is not None:
            one = dataclasses.replace(self, type=self.item, item=None, optional=False).allowed()
            text = f"a comma-separated list, each {one.removeprefix('a ').removeprefix('an ')}"
            return text + (f", or null ({self.null})" if self.optional else "")
        if self.choices:
            text = "one of " + _choices_text(self.choices)
        elif self.type is bool:
            text = "true or false"
        elif self.lo is not None or self.hi is not None:
            kind = "an integer" if self.type is int else "a number"
            lo = "" if self.lo is None else (f"> {self.lo:g}" if self.lo_open else f">= {self.lo:g}")
            hi = "" if self.hi is None else (f"< {self.hi:g}" if self.hi_open else f"<= {self.hi:g}")
            text = f"{kind} " + " and ".join(s for s in (lo, hi) if s)
        else:
            text = "a string" if self.type is str else f"a {self.type.__name__}"
        return text + (f", or null ({self.null})" if self.optional else "")


def _choices_text(choices: tuple[str, ...]) -> str:
    """The choices in words; every pairing "a+b" of two word lists (layer_types' attention beside a recurrent
    mixer) is said once as the lists, not spelled out pair by pair."""
    pairs = [c for c in choices if "+" in c]
    firsts = list(dict.fromkeys(c.split("+")[0] for c in pairs))
    seconds = list(dict.fromkeys(c.split("+")[1] for c in pairs))
    if len(pairs) < 4 or len(pairs) != len(firsts) * len(seconds):
        return ", ".join(choices)
    singles = ", ".join(c for c in choices if "+" not in c)
    return f"{singles}, or A+B side by side (A one of {', '.join(firsts)}; B one of {', '.join(seconds)})"


def allowed_value(spec: FieldSpec, value: Any) -> bool:
    """Is a non-null value of the declared type, among the choices and inside the range?"""
    if spec.item is not None:
        one = dataclasses.replace(spec, type=spec.item, item=None)
        return isinstance(value, tuple) and len(value) > 0 and all(allowed_value(one, x) for x in value)
    if isinstance(value, bool) and spec.type is not bool:
        return False
    numeric = spec.type is float and isinstance(value, int)
    if not (isinstance(value, spec.type) or numeric):
        return False
    if spec.choices and value not in spec.choices:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if spec.type in (int, float):
        if spec.lo is not None and (value < spec.lo or (spec.lo_open and value == spec.lo)):
            return False
        if spec.hi is not None and (value > spec.hi or (spec.hi_open and value == spec.hi)):
            return False
    return True


def field_problem(spec: FieldSpec, value: Any) -> str | None:
    if value is None:
        return None if spec.optional else f"{spec.name}: null is not allowed; expected {spec.allowed()}"
    if allowed_value(spec, value):
        return None
    if spec.item is not None and isinstance(value, tuple) and value:   # name the entry, not a Python tuple
        one = dataclasses.replace(spec, type=spec.item, item=None, optional=False)
        bad = [(i, x) for i, x in enumerate(value, 1) if not allowed_value(one, x)]
        if bad:
            (i, x), more = bad[0], len(bad) - 1
            return (f"{spec.name}: entry {i:,} of {len(value):,}, {shown(x)}, is not {one.allowed()}"
                    + (f" ({more:,} more like it)" if more else ""))
    return f"{spec.name}: {shown(value)} is not {spec.allowed()}"


# ---- arguments that are not config fields (batch, seq, dtype, a chart's range...) -----------------------------
def choice_problem(name: str, value: Any, allowed: Iterable) -> str | None:
    """'dtype: 'int8' is not one of fp32, bf16, fp16', or None when value is one of `allowed`."""
    allowed = tuple(allowed)
    return None if value in allowed else f"{name}: {shown(value)} is not one of {', '.join(map(str, allowed))}"


def int_problem(name: str, value: Any, lo: int = 1) -> str | None:
    """'batch: 0 is not an integer >= 1', or None for an int (not a bool) >= lo."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= lo
    return None if ok else f"{name}: {shown(value)} is not an integer >= {lo}"


def number_problem(name: str, value: Any, lo: float = 0, strict: bool = False) -> str | None:
    """'cap: 0 is not a number > 0', or None for a real number >= lo (> lo when strict); NaN never passes."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
          and (value > lo if strict else value >= lo))
    return None if ok else f"{name}: {shown(value)} is not a number {'>' if strict else '>='} {lo:g}"


def per_layer_problem(name: str, value: tuple | None, n_layers: int) -> str | None:
    """A per-layer list (one entry per layer, or null) of the wrong length: its message, else None."""
    if value is None or len(value) == n_layers:
        return None
    n = len(value)
    return f"{name}: {n} {'entry' if n == 1 else 'entries'} for n_layers={n_layers}; give one per layer, or null"


def size_problems(batch: Any, seq: Any) -> list[str]:
    """The batch and sequence-length checks every budget, measurement and command makes."""
    return [p for p in (int_problem("batch", batch), int_problem("seq", seq)) if p]


def require(*problems: str | None) -> None:
    """Raise one ValueError naming every problem given (None entries are checks that passed)."""
    found = [p for p in problems if p]
    if found:
        raise ValueError("; ".join(found))


# ---- raw values (YAML scalars, CLI and URL strings) to a field's type ------------------------------------------
_NULL_WORDS = ("null", "none", "~", "")


def coerce_value(spec: FieldSpec, raw: Any) -> Any:
    """Convert a raw value to the field's type, or raise ValueError naming the field and what is allowed."""
    bad = ValueError(f"{spec.name}: {'null' if raw is None else shown(raw)} is not {spec.allowed()}")
    if spec.item is not None:
        return _coerce_list(spec, raw, bad)
    return _coerce_scalar(spec, raw, bad)


def _coerce_scalar(spec: FieldSpec, raw: Any, bad: ValueError) -> Any:
    if raw is None or (spec.type is not str and isinstance(raw, str) and raw.strip().lower() in _NULL_WORDS):
        if spec.optional:
            return None
        raise bad
    if spec.type is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and (value := parse_bool(raw)) is not None:
            return value
        raise bad
    if spec.type is int:
        if isinstance(raw, bool):
            raise bad
        if isinstance(raw, int):
            return raw
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        if isinstance(raw, str):  # exact: "123456789012345678901" or "1e30" must not pass through a float
            try:
                value = Decimal(raw.replace("_", "").replace(",", "").strip())
            except InvalidOperation:
                raise bad from None
            if value.is_finite() and value.adjusted() < 4300 and value == value.to_integral_value():
                return int(value)
        raise bad
    if spec.type is float:
        if isinstance(raw, bool):
            raise bad
        try:
            value = float(raw)
        except (TypeError, ValueError, OverflowError):
            raise bad from None
        if not math.isfinite(value):
            raise bad
        return value
    if not isinstance(raw, str):
        raise bad
    return raw


def _coerce_list(spec: FieldSpec, raw: Any, bad: ValueError) -> tuple | None:
    """A list field from a YAML list or a 'a, b, c' string (brackets allowed, as a URL or CLI value)."""
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in _NULL_WORDS):
        if spec.optional:
            return None
        raise bad
    if isinstance(raw, str):
        raw = raw.strip().strip("[]").split(",")
    if not isinstance(raw, (list, tuple)) or not raw:
        raise bad
    one = dataclasses.replace(spec, type=spec.item, item=None, optional=False)
    return tuple(_coerce_scalar(one, x.strip() if isinstance(x, str) else x, bad) for x in raw)
