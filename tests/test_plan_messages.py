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


def test_an_unknown_kv_cache_type_names_kv_quant_and_lists_the_choices():
    """Pricing a cache in a type llama.cpp does not offer for it (q3_k) says which input is wrong and lists the
    choices, comma-separated, in the same words the Planner shows beside the input."""
    from engine.plan.quant import KV_QUANTS, kv_quant_bytes
    want = ("kv_quant: 'q3_k' is not one of none, fp8, int8, int4, f16, bf16, f32, q8_0, q4_0, q4_1, q5_0, q5_1, "
            "iq4_nl")
    with pytest.raises(ValueError) as e:
        kv_quant_bytes([(4096, 128)], "q3_k", "bf16")
    assert str(e.value) == want
    assert setup_problems(Setup(mode="infer", kv_quant="q3_k")) == [want] and len(KV_QUANTS) == 13


@pytest.mark.parametrize("suffix", ["", "+imatrix", "-imatrix"])
@pytest.mark.parametrize("ftype", ["Q4_K_M", "IQ2_M", "Q8_0"])
def test_a_gguf_file_type_is_taken_with_or_without_its_importance_matrix_suffix(ftype, suffix):
    """gguf:Q4_K_M+imatrix (a file made with an importance matrix) and gguf:IQ2_M-imatrix are storages the
    Planner prices; a stray character after the name is refused by the quant input's name."""
    assert setup_problems(Setup(mode="infer", quant=f"gguf:{ftype}{suffix}")) == []
    bad = setup_problems(Setup(mode="infer", quant=f"gguf:{ftype}{suffix}x"))
    assert [p.split(":")[0] for p in bad] == ["quant"]


@pytest.mark.parametrize("search", [False, True])
def test_an_unknown_gpu_is_refused_by_the_gpu_input(search):
    """`plan` and the fewest-GPU search both name the gpu input and list the GPUs they know."""
    from engine.plan import plan, smallest_layout
    with pytest.raises(ValueError) as e:
        smallest_layout(LLAMA, "h100", Setup()) if search else plan(LLAMA, "h100", Layout(), Setup())
    assert str(e.value).startswith("gpu: 'h100' is not one of h100-80gb, h200-141gb, ")


def test_tensor_parallelism_must_divide_the_dense_ffn_only_where_there_is_one():
    """Llama-3-8B with a 14,330-wide FFN: tp 4 divides its 32 and 8 heads but not d_ff, and the message names d_ff.
    Qwen3-30B-A3B has MoE in every layer, so its d_ff field is never built: a d_ff tp 4 does not divide is no
    reason to refuse tp 4, whose 768-wide experts it divides."""
    from engine.presets import get_preset
    assert layout_problems(replace(LLAMA, d_ff=14_330), Layout(4, tp=4)) == ["tp: 4 does not divide d_ff = 14330"]
    moe = get_preset("qwen3-30b-a3b").config
    assert moe.expert_width == 768 and moe.moe_first_dense is None and moe.moe_every == 1
    assert layout_problems(replace(moe, d_ff=6_002), Layout(4, tp=4)) == []
