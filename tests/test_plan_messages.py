"""The Planner's and Deploy page's inputs (Layout, Setup, Serving) refuse a wrong value with a message that starts
with that input's name, `field: ...`, which the pages and the CLI show beside the input (never a traceback)."""
from dataclasses import fields, replace

import pytest

from engine.plan import setup_problems
from engine.plan.memory import Setup
from engine.plan.parallel import Layout, layout_problems
from engine.plan.serve import Serving, serving_problems
from engine.presets import PRESETS

LLAMA = PRESETS["llama-3-8b"].config
CHECKS = {Layout: lambda lay: layout_problems(LLAMA, lay), Setup: setup_problems, Serving: serving_problems}


def wrong(value) -> list:
    """Values no input of that kind takes: below every range, off every list, of another type."""
    if isinstance(value, bool):
        return ["yes"]
    if isinstance(value, (int, float)) or value is None:
        return [-1, -0.5, "many"]
    if isinstance(value, str):
        return ["no-such-choice"]
    return [("no-such-choice",)]


CASES = [(cls, f.name, bad) for cls in CHECKS for f in fields(cls) for bad in wrong(getattr(cls(), f.name))]
IN_USE = {"lora_rank": {"finetune": "lora"}, "lora_targets": {"finetune": "lora"}}   # read only for LoRA


@pytest.mark.parametrize("cls,name,bad", CASES, ids=[f"{c.__name__}.{n}={b!r}" for c, n, b in CASES])
def test_a_wrong_input_is_refused_by_its_name(cls, name, bad):
    problems = CHECKS[cls](replace(cls(), **IN_USE.get(name, {}), **{name: bad}))
    assert problems, f"{cls.__name__}.{name} = {bad!r} was accepted"
    assert all(p.startswith(f"{name}: ") for p in problems), problems
