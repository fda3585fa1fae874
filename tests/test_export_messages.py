"""Every refusal of the Hugging Face writers, word for word: each family, on each config it is held on
(tests/export_cases.py SOURCES, all exact), is tried with every single-field change of export_cases.CHANGES; the full
list of problems of each refused change is a reviewed text (tests/golden/export_messages.json), and the changes
the family can still express are listed too, so a refusal that goes missing or appears fails as well."""
import pytest

from engine.interop.hf_export import _WRITERS, hf_problems
from tests.export_cases import CASES, CHANGES, SOURCES, changed, source
from tests.golden import check_golden


def test_every_writer_is_held_on_some_config():
    assert set(SOURCES) == set(_WRITERS)


@pytest.mark.parametrize("family,name", CASES)
def test_each_change_a_writer_refuses_is_named_field_by_field(family, name):
    cfg = source(name)
    assert hf_problems(cfg, family)[1] == []
    expressible = []
    for label in CHANGES:
        other = changed(cfg, label)
        if other is None:
            continue
        problems = hf_problems(other, family)[1]
        if problems:
            check_golden("export_messages", f"{family} <- {name}: {label}", problems)
        else:
            expressible.append(label)
    check_golden("export_messages", f"{family} <- {name}: expressible", expressible)
