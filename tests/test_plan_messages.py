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


# (input, its lowest or highest value the pages accept, the first value past it): both sides of every edge
SERVING_EDGES = [("non_torch_bytes", 0, -1), ("activation_bytes", 0, -1), ("block_size", 1, 0), ("chunk", 1, 0),
                 ("utilization", 1.0, 1.01)]


@pytest.mark.parametrize("name,edge,past", SERVING_EDGES, ids=[e[0] for e in SERVING_EDGES])
def test_a_serving_input_at_its_edge_is_taken_and_one_past_it_refused(name, edge, past):
    """The Deploy page's inputs at their edges: no non-torch overhead (llama.cpp-like, or measured 0), a measured
    activation peak of 0, one-token pages and chunks, all of the memory; one step further is refused by name."""
    assert serving_problems(Serving(**{name: edge})) == []
    assert [p.split(":")[0] for p in serving_problems(Serving(**{name: past}))] == [name]


# plan()'s own arguments: (keyword, accepted edge, refused value)
PLAN_EDGES = [("mfu", 1.0, 1.5), ("efficiency", 1.0, 0), ("compute_efficiency", 1.0, 1.5),
              ("compute_efficiency", 0.01, 0), ("price", 0, -1), ("tokens", 1, 0), ("request_tokens", 1, 0),
              ("gpu", "h100-80gb", "H100")]


@pytest.mark.parametrize("name,edge,past", PLAN_EDGES, ids=[f"{e[0]}={e[2]!r}" for e in PLAN_EDGES])
def test_a_plan_argument_past_its_edge_is_refused_by_its_name(name, edge, past):
    """The Planner's GPU, MFU, efficiencies, price and token inputs: the edge is planned, one step past it gets
    one message that starts with that input's name (never a wrong number from a 150% efficiency)."""
    from engine.plan import plan
    mode = "infer" if name in ("efficiency", "compute_efficiency", "request_tokens") else "train"
    args = dict(gpu="h100-80gb", layout=Layout(1), setup=Setup(mode=mode, seq=64))
    plan(LLAMA, **{**args, name: edge})
    with pytest.raises(ValueError) as e:
        plan(LLAMA, **{**args, name: past})
    assert str(e.value).startswith(f"{name}: ") and ";" not in str(e.value), str(e.value)
