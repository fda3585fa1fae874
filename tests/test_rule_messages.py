"""What a user reads when a config is wrong, over every knob where it is active (tests/knob_cases.py):

- a value outside its declaration gets exactly one message, the field's own range message: no family rule that
  ties fields together runs on a value already reported (it would add a second, confusing message, or crash on
  a zero or a wrong type);
- every message a family rule gives names a declared field first, as `field: ...`, so the editor and the CLI can
  point at it.
"""
import math

import pytest

from engine.config import FIELDS, ConfigError, ModelConfig
from engine.validation import field_problem
from tests.knob_cases import BASE_FIELDS, KNOBS



def bad_values(name: str) -> list:
    """Values the declaration of `name` refuses: just outside each end of its range, off its list of choices,
    null where null is not allowed, an entry of a list field out of its range, a bool for a number."""
    spec = FIELDS[name]
    kind = spec.item or spec.type
    out = [] if spec.optional else [None]
    if spec.choices:
        out.append("no-such-choice")
    if kind in (int, float):
        step = 1 if kind is int else 0.5
        if spec.lo is not None:
            out.append(spec.lo if spec.lo_open else spec.lo - step)
        if spec.hi is not None and math.isfinite(spec.hi):
            out.append(spec.hi if spec.hi_open else spec.hi + step)
        out.append(True)
    if kind is bool:
        out.append("yes")
    if spec.item is not None:
        out = [None if v is None else (v,) for v in out] + [()]
    return out


CASES = [(name, bad) for name in KNOBS for bad in bad_values(name)]


@pytest.mark.parametrize("name,bad", CASES, ids=[f"{n}={b!r}" for n, b in CASES])
def test_a_refused_value_gets_one_message_its_fields_own(name, bad):
    context = {**BASE_FIELDS, **KNOBS[name][0]}
    ModelConfig(**context)   # the context itself is valid
    with pytest.raises(ConfigError) as e:
        ModelConfig(**{**context, name: bad})
    assert e.value.problems == [field_problem(FIELDS[name], bad)]


# every config a knob case builds (its context with the knob's other value), once each
STATES = list({repr(sorted(d.items())): d for d in ({**BASE_FIELDS, **ctx, name: value}
                                                    for name, (ctx, value) in KNOBS.items())}.values())


def test_a_refused_value_is_reported_once_in_every_family_context():
    """Each field a knob case sets (and the sizes), refused in that case's config: still its one message, so a
    rule that reads the field (MoE's groups, the indexer's layer count...) skips it once it is reported."""
    checked = 0
    for state in STATES:
        ModelConfig(**state)
        for name in state:
            for bad in bad_values(name) if name != "name" else ():
                with pytest.raises(ConfigError) as e:
                    ModelConfig(**{**state, name: bad})
                assert e.value.problems == [field_problem(FIELDS[name], bad)], (state, name, bad)
                checked += 1
    assert checked > 1000


def test_every_rule_message_names_a_declared_field_first():
    """Each knob's other value, set in every knob's config: every message a rule gives starts `field: `."""
    seen = 0
    for state in STATES:
        for name, (_, value) in KNOBS.items():
            try:
                ModelConfig(**{**state, name: value})
            except ConfigError as e:
                seen += len(e.problems)
                for p in e.problems:
                    assert p.split(":", 1)[0] in FIELDS and ": " in p, (state, name, value, p)
    assert seen > 100   # the rules were exercised, not only valid configs built
