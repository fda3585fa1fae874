"""Every figure the app and the CLI show beside its formula looks the formula up by the figure's name
(`budget` prints `b.formulas[k]` for each k; the Planner and Deploy pages the same), so each formula must name a
figure of its result, each figure must have one, and a formula that is a sum of figures must add up."""
import re
from dataclasses import fields

import pytest

from engine.budget.flops import flops_budget
from engine.budget.memory import memory_budget
from engine.plan import plan
from engine.plan.memory import Layout, Setup
from engine.presets import PRESETS

# dense, MLA with the sparse indexer, a Gated DeltaNet hybrid with MoE, a Mamba-2 hybrid
PRESET_NAMES = ["gpt2", "deepseek-v3.2", "qwen3-next-80b-a3b", "nemotron-h-8b"]
SUM = re.compile(r"^\w+( \+ \w+)+$")   # names joined by " + ", whatever their case


def numbers(obj) -> dict[str, float]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)
            if isinstance(getattr(obj, f.name), (int, float)) and not isinstance(getattr(obj, f.name), bool)}


def check_sums(formulas: dict[str, str], values: dict) -> None:
    """A formula "a + b + c" adds the figures a, b and c (the byte budgets say "weights" for weights_bytes)."""
    for key, text in formulas.items():
        if SUM.match(text):
            terms = [values[name] if name in values else values[f"{name}_bytes"] for name in text.split(" + ")]
            assert values[key] == sum(terms), (key, text)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_flops_every_figure_has_its_formula(name):
    for causal in (False, True):
        f = flops_budget(PRESETS[name].config, 2, 512, causal=causal)
        shown = {k for k, v in numbers(f).items() if v}   # a zero figure (no indexer, no recurrent layer) is not shown
        assert shown <= set(f.formulas) <= set(numbers(f)), (set(f.formulas) ^ shown)
        check_sums(f.formulas, numbers(f))


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_memory_every_formula_names_a_figure(name):
    b = memory_budget(PRESETS[name].config, 2, 512)
    assert set(b.formulas) <= set(numbers(b)) and "kv_cache_bytes" in b.formulas
    check_sums(b.formulas, numbers(b))


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_serving_and_speed_formulas_name_their_figures(name):
    p = plan(PRESETS[name].config, "h100-80gb", Layout(8), Setup(mode="infer", seq=4096, quant="fp8"))
    cap, sp = p.capacity.as_dict(), p.speed.as_dict()
    assert {"blocks", "kv_tokens", "max_context", "max_concurrency"} <= set(p.capacity.formulas) <= set(cap)
    assert p.speed.formulas and set(p.speed.formulas) <= set(sp)
    out = p.as_dict()["serving"]   # `plan --json`: the numbers a user holds against vLLM's log
    assert out["kv_tokens"] == p.capacity.kv_tokens and out["available_kv_bytes"] == p.capacity.available_bytes
    assert out["blocks"] == p.capacity.blocks and out["max_concurrency"] == p.capacity.max_concurrency


@pytest.mark.parametrize("name,layers", [("gpt2", 12), ("llama-3-8b", 32)])
def test_the_activation_formula_adds_up_to_the_activation_bytes(name, layers):
    """One layer's saved tensors x L, plus the embedding's and the head's: the total shown (a model whose
    layers are alike; a hybrid's formula says its layers differ)."""
    b = memory_budget(PRESETS[name].config, 2, 512)
    text = b.formulas["activations_bytes"]
    m = re.fullmatch(r"saved by autograd \(sdpa attention, N=B\*T=1024, e=2 B\): layer 1 = (.+) B "
                     r"\(x (\d+) layers\); embedding (.+); head (.+)", text)
    assert m, text

    def terms(part: str) -> int:
        pairs = [t.rsplit(" ", 1) for t in part.split(" + ")]
        assert all(re.fullmatch(r"[a-z_]+", k) for k, _ in pairs), part
        return sum(int(v.replace(",", "")) for _, v in pairs)
    assert int(m[2]) == layers
    assert terms(m[1]) * layers + terms(m[3]) + terms(m[4]) == b.activations_bytes
