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


def test_a_tensor_split_that_leaves_a_remainder_names_the_width_it_cuts():
    """DeepSeek-V2-Lite with one shared expert 1,410 wide: tp 4 divides its 16 heads and the 1,408-wide routed
    experts but not the shared expert, and the message names that width, not the routed one."""
    from engine.presets import get_preset
    cfg = replace(get_preset("deepseek-v2-lite").config, n_shared_experts=1, shared_d_ff=1410)
    assert layout_problems(cfg, Layout(4, tp=4)) == ["tp: 4 does not divide n_shared_experts*shared_d_ff = 1410"]
    two = replace(cfg, n_shared_experts=2, shared_d_ff=705)   # the shared experts are one FFN of 2 x 705
    assert layout_problems(two, Layout(4, tp=4)) == ["tp: 4 does not divide n_shared_experts*shared_d_ff = 1410"]
