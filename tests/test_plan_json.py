"""What `python -m engine plan --json` prints (Plan.as_dict), held whole for a table of plans: every key the user's
scripts read, every figure, and its JSON type (a byte count or a tensor width stays an integer: 4, never 4.0), every
formula and note word for word. The figures themselves are checked against independent references elsewhere
(test_plan.py, test_serve.py, test_plan_figures.py); this table pins the whole document a user gets so that a renamed
key, a dropped field, a float where an int was, or a changed note shows up as the user would see it."""
from __future__ import annotations

import json

import pytest

from engine.config import ModelConfig
from engine.plan import Layout, Serving, Setup, plan
from engine.presets import get_preset
from tests.golden import check_golden

SMALL = ModelConfig(name="small", vocab_size=64, context_length=32, d_model=32, n_layers=4, n_heads=4,
                    n_kv_heads=2, ffn="swiglu", d_ff=64, norm="rmsnorm", norm_bias=False, bias=False,
                    position="rope", tie_embeddings=False)
# 5 rows and 3 columns per tp rank: uneven dim-0 chunks over the data ranks, so ZeRO's rank 0 holds the most
ODD = SMALL.replace(name="odd", vocab_size=67, d_model=24, n_heads=4, n_kv_heads=2, d_ff=40)


def _small(name: str, layers: int) -> ModelConfig:
    cfg = get_preset(name).config
    types = {"layer_types": cfg.layer_types[:layers]} if cfg.layer_types else {}
    return cfg.replace(n_layers=layers, **types)


def typed(x):
    """The JSON document with each number's type spelled out: an int stays an int, a float becomes 'float:<9
    significant digits>' (so 4 and 4.0 differ, as they do in a user's JSON)."""
    if isinstance(x, dict):
        return {k: typed(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [typed(v) for v in x]
    if isinstance(x, float):
        return f"float:{x:.9g}"
    return x


# name -> (config, gpu, layout, setup, plan's keyword arguments)
PLANS = {
    "train-dense-tp2-pp2-zero1": (SMALL, "h100-80gb", Layout(8, tp=2, pp=2, zero=1), Setup(seq=16, micro_batches=4),
                                  {}),
    "train-odd-zero3-dp3": (ODD, "a100-40gb", Layout(3, zero=3), Setup(seq=16, recompute="full"),
                            {"tokens": 10**6, "mfu": 0.3, "price": 1.5, "currency": "EUR"}),
    "train-lora-tp2": (SMALL, "h100-80gb", Layout(2, tp=2), Setup(seq=16, finetune="lora", lora_rank=4,
                                                                  lora_targets=("q", "v", "o", "down")), {}),
    "train-qlora-budget": (SMALL, "h100-80gb", Layout(1), Setup(seq=16, finetune="qlora", lora_rank=2),
                           {"tokens": 5000}),
    "train-moe-ep2-zero2": (_small("mixtral-8x7b", 2), "h100-80gb", Layout(4, ep=2, zero=2), Setup(seq=32), {}),
    "infer-vllm-tp2-fp8kv": (_small("llama-3-8b", 2), "h100-80gb", Layout(2, tp=2),
                             Setup(mode="infer", seq=512, micro_batch=4, kv_quant="fp8", quant="int4-g128"),
                             {"request_tokens": 1000, "price": 3.0}),
    "infer-gguf-llamacpp": (_small("llama-3-8b", 2), "rtx-4090-24gb", Layout(1),
                            Setup(mode="infer", seq=256, quant="gguf:Q4_K_M", kv_quant="q8_0"), {}),
    "infer-tied-pp2": (_small("gemma-2-2b", 2), "h100-80gb", Layout(2, pp=2), Setup(mode="infer", seq=128),
                       {"serving": Serving(utilization=0.8, chunk=1024, block_size=32)}),
    "infer-moe-mla-checkpoint-ep2": (_small("deepseek-v3", 4), "h200-141gb", Layout(4, tp=2, ep=2),
                                     Setup(mode="infer", seq=64, micro_batch=8, quant="checkpoint"),
                                     {"efficiency": 0.6, "compute_efficiency": 0.4}),
    "infer-hybrid-tp2": (_small("qwen3-next-80b-a3b", 4), "h100-80gb", Layout(2, tp=2),
                         Setup(mode="infer", seq=64, quant="nf4", quantize_also=("head",)), {}),
    "infer-mxfp4-shipped": (_small("gpt-oss-20b", 2), "h100-80gb", Layout(1), Setup(mode="infer", seq=64),
                            {"serving": Serving(engine="llama.cpp", activation_bytes=1000)}),
    "infer-compute-bound": (_small("llama-3-8b", 2), "h100-80gb", Layout(1),
                            Setup(mode="infer", seq=16, micro_batch=1024), {}),
    "infer-hybrid-pp2": (_small("qwen3-next-80b-a3b", 4), "h100-80gb", Layout(2, pp=2), Setup(mode="infer", seq=64),
                         {"request_tokens": 100}),
    "infer-tied-pp2-int8-head": (_small("gemma-2-2b", 2), "h100-80gb", Layout(2, pp=2),
                                 Setup(mode="infer", seq=64, quant="int8", quantize_also=("head",)), {}),
    "infer-fp32-int8": (SMALL, "l4-24gb", Layout(1), Setup(mode="infer", seq=32, policy="fp32", quant="int8"), {}),
    "infer-fp16-nf4": (SMALL, "l4-24gb", Layout(1), Setup(mode="infer", seq=32, policy="mixed-fp16", quant="nf4"),
                       {}),
    "infer-moe-no-shared": (_small("mixtral-8x7b", 2), "h100-80gb", Layout(1), Setup(mode="infer", seq=128), {}),
    "train-gpt2-pp2": (_small("gpt2", 2), "h100-80gb", Layout(2, pp=2), Setup(seq=32), {}),
    "infer-bloom-pp2": (_small("bloom-560m", 2), "h100-80gb", Layout(2, pp=2), Setup(mode="infer", seq=32), {}),
    "infer-does-not-fit": (_small("llama-3-8b", 60), "l4-24gb", Layout(1), Setup(mode="infer", seq=1024), {}),
}


@pytest.mark.parametrize("name", PLANS)
def test_plan_json_is_the_reviewed_document(name):
    cfg, gpu, layout, setup, kw = PLANS[name]
    d = plan(cfg, gpu, layout, setup, **kw).as_dict()
    assert json.loads(json.dumps(d)) == d          # plain JSON: no tuples, no objects the CLI could not print
    sizes = list(d["weights_by_storage"].values())
    assert sizes == sorted(sizes, reverse=True)    # largest storage first, as the Planner lists them
    check_golden("plan_json", name, typed(d))


# Every refusal a user can meet, word for word: the inputs' own names, the values, the choices listed.
MOE = _small("deepseek-v2-lite", 3).replace(n_shared_experts=2, shared_d_ff=705, moe_first_dense=1, d_ff=10946)
LAYOUTS = {
    "zero-gpus": (SMALL, Layout(0)), "fractional-tp": (SMALL, Layout(4, tp=1.5)), "bool-pp": (SMALL, Layout(pp=True)),
    "ep-zero": (SMALL, Layout(ep=0)), "zero-4": (SMALL, Layout(zero=4)), "sp-int": (SMALL, Layout(sequence_parallel=1)),
    "gpus-not-multiple": (SMALL, Layout(6, tp=4)), "tp-3-moe": (MOE, Layout(3, tp=3)), "tp-4-moe": (MOE, Layout(4, tp=4)),
    "moe-gpus-not-multiple": (MOE, Layout(3, tp=2, ep=2)),
    "tp-3-dense": (SMALL, Layout(3, tp=3)), "ep-dense": (SMALL, Layout(2, ep=2)), "ep-3-moe": (MOE, Layout(3, ep=3)),
    "ep-4-dp2": (MOE, Layout(2, ep=4)), "pp-5": (SMALL, Layout(5, pp=5)),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_layout_refusals_word_for_word(name):
    from engine.plan.parallel import layout_problems
    check_golden("plan_json", f"layout_problems/{name}", layout_problems(*LAYOUTS[name]))


SETUPS = {
    "every-choice-wrong": dict(mode="serve", policy="fp7", optimizer="adam", recompute="some", finetune="dora",
                               quant="int3", kv_quant="q3_k", micro_batch=0, micro_batches=-1, seq=1.5,
                               quantize_also=("embeddings", "norms")),
    "lora-targets-unknown": dict(finetune="lora", lora_targets=("q", "qkv", "w1"), lora_rank=0),
    "lora-no-targets": dict(finetune="qlora", lora_targets=(), lora_rank=True),
    "full-train-quantized": dict(quant="int8"),
    "full-train-lora-fields-ignored": dict(lora_targets=("x",), lora_rank=0),
}


@pytest.mark.parametrize("name", SETUPS)
def test_setup_refusals_word_for_word(name):
    from engine.plan import setup_problems
    check_golden("plan_json", f"setup_problems/{name}", setup_problems(Setup(**SETUPS[name])))


SERVINGS = {
    "engine": dict(engine="tgi"), "block-size": dict(block_size=0), "non-torch-negative": dict(non_torch_bytes=-1),
    "non-torch-zero": dict(non_torch_bytes=0), "utilization-zero": dict(utilization=0),
    "utilization-over-one": dict(utilization=1.5), "activation-negative": dict(activation_bytes=-1),
    "activation-zero": dict(activation_bytes=0), "chunk-zero": dict(chunk=0),
}


@pytest.mark.parametrize("name", SERVINGS)
def test_serving_refusals_word_for_word(name):
    from engine.plan.serve import serving_problems
    check_golden("plan_json", f"serving_problems/{name}", serving_problems(Serving(**SERVINGS[name])))


PLAN_ARGS = {
    "train": dict(gpu="h100", mfu=0, price=-1, tokens=0, efficiency=1.5, compute_efficiency=0, request_tokens=0),
    "shares-over-one": dict(gpu="h100-80gb", mfu=1.01, efficiency=2, compute_efficiency=1.5, price="free"),
}


@pytest.mark.parametrize("name", PLAN_ARGS)
def test_plan_argument_refusals_word_for_word(name):
    """plan() names every wrong argument at once, in one message joined by '; '."""
    with pytest.raises(ValueError) as e:
        plan(SMALL, layout=Layout(5, pp=5), setup=Setup(mode="infer", seq=0), **PLAN_ARGS[name])
    check_golden("plan_json", f"plan_problems/{name}", str(e.value).split("; "))


def test_the_fewest_gpu_search_refuses_by_the_same_names():
    from engine.plan import smallest_layout
    with pytest.raises(ValueError) as e:
        smallest_layout(SMALL, "h100", Setup(finetune="lora", lora_targets=()))
    check_golden("plan_json", "smallest_layout_problems", str(e.value).split("; "))


# Hand counts of one GPU's slice: (role, full shape, tp, ep) -> local shape, every entry an int
from engine.plan.parallel import chunk_shape, tp_shape   # noqa: E402
from engine.plan.tensors import Tensor   # noqa: E402

TP_SHAPES = [
    ("q", (64, 32), 4, 1, (16, 32)), ("q_bias", (64,), 4, 1, (16,)), ("o", (32, 64), 4, 1, (32, 16)),
    ("down", (32, 96), 2, 1, (32, 48)), ("up", (96, 32), 2, 1, (48, 32)), ("attn_norm", (32,), 4, 1, (32,)),
    ("expert_gate", (8, 96, 32), 2, 4, (2, 48, 32)), ("expert_up", (8, 96, 32), 4, 2, (4, 24, 32)),
    ("expert_down", (8, 32, 96), 2, 4, (2, 32, 48)), ("lora_B.q", (64, 8), 4, 1, (16, 8)),
    ("lora_A.q", (8, 32), 4, 1, (8, 32)), ("lora_A.down", (8, 96), 2, 1, (8, 48)),
    ("lora_B.down", (32, 8), 2, 1, (32, 8)), ("lora_A.o", (8, 64), 4, 1, (8, 16)), ("kv_a", (40, 32), 4, 1, (40, 32)),
]


@pytest.mark.parametrize("role,shape,tp,ep,want", TP_SHAPES, ids=[f"{r}-tp{t}-ep{e}" for r, _, t, e, _ in TP_SHAPES])
def test_one_ranks_slice_by_hand(role, shape, tp, ep, want):
    """Megatron's column split (q, up, lora_B of a column-split matrix), row split (o, down, lora_A of a
    row-split one), routed experts divided E/ep with their hidden width split by tp; the rest replicated."""
    got = tp_shape(Tensor("x", shape, role, 0, "matrix"), tp, ep)
    assert got == want and all(type(n) is int for n in got)


def test_expert_parallelism_defaults_to_none():
    """Without ep, a rank holds every routed expert (ep = 1: the tensor's expert count is whole)."""
    t = Tensor("x", (8, 96, 32), "expert_up", 0, "matrix")
    assert tp_shape(t, 2) == (8, 48, 32)
    assert tp_shape(Tensor("x", (8, 32, 96), "expert_down", 0, "matrix"), 2) == (8, 32, 48)


CHUNKS = [((10, 3), 4, 0, (3, 3)), ((10, 3), 4, 3, (1, 3)), ((10,), 3, 2, (2,)), ((2, 5), 4, 3, (0, 5)),
          ((7, 2), 1, 0, (7, 2)), ((), 4, 1, ())]


@pytest.mark.parametrize("shape,dp,rank,want", CHUNKS)
def test_zero_chunks_by_hand(shape, dp, rank, want):
    """torch.chunk's pieces: ceil(n0/dp) rows each, the last ranks the remainder or nothing."""
    got = chunk_shape(shape, dp, rank)
    assert got == want and all(type(n) is int for n in got)


# Documented defaults, called as a user calls them (without the argument): each equals the documented value given
# explicitly, and a different value would change the answer (so the default is what decides it).
def _defaults():
    from engine.budget.devices import DEVICE_PROFILES, GPUS
    from engine.plan.cost import cost
    from engine.plan.finetune import lora_trainable
    from engine.plan.memory import gpu_memory, kv_cache_per_gpu
    from engine.plan.serve import capacity, memory_at, sequence_bytes
    from engine.plan.speed import speed
    dev = DEVICE_PROFILES[GPUS["h100-80gb"]]
    hybrid = _small("qwen3-next-80b-a3b", 4)   # gdn, gdn | gdn, full over 2 stages
    inf, lay2 = Setup(mode="infer", seq=64, micro_batch=2), Layout(4, pp=2, zero=3)
    moe = _small("mixtral-8x7b", 2)
    return {
        "gpu_memory.stage": (gpu_memory, (SMALL, lay2, Setup(seq=8)), {"stage": 0}, {"stage": 1}),
        "gpu_memory.dp_rank": (gpu_memory, (ODD, Layout(2, zero=3), Setup(seq=8)), {"dp_rank": 0}, {"dp_rank": 1}),
        "kv_cache_per_gpu.stage": (kv_cache_per_gpu, (hybrid, Layout(2, pp=2), inf), {"stage": 0}, {"stage": 1}),
        "sequence_bytes.batch": (sequence_bytes, (SMALL, Layout(), inf, 16), {"batch": 1}, {"batch": 2}),
        "sequence_bytes.stage": (sequence_bytes, (hybrid, Layout(2, pp=2), inf, 16), {"stage": 0}, {"stage": 1}),
        "memory_at.batch": (memory_at, (SMALL, Layout(), inf, Serving(), 16), {"batch": 1}, {"batch": 3}),
        "capacity.serving": (capacity, (SMALL, 2**33, Layout(), inf), {"sv": Serving()},
                             {"sv": Serving(utilization=0.5)}),
        "capacity.request_tokens": (capacity, (SMALL, 2**33, Layout(), inf), {"request_tokens": None},
                                    {"request_tokens": 8}),
        "speed.efficiency": (speed, (moe, dev, Layout(), inf, 1, 64), {"efficiency": 0.75}, {"efficiency": 0.5}),
        "speed.compute_efficiency": (speed, (moe, dev, Layout(), inf, 512, 4096), {"compute_efficiency": 0.5},
                                     {"compute_efficiency": 0.25}),
        "cost.dtype": (cost, (SMALL, dev, 8, 16, 10**6, 0.4, 2.0), {"dtype": "bf16"}, {"dtype": "fp32"}),
        "cost.frozen_base": (cost, (SMALL, dev, 8, 16, None, 0.4, 2.0), {"frozen_base": False},
                             {"frozen_base": True}),
        "cost.currency": (cost, (SMALL, dev, 8, 16, 10**6, 0.4, 2.0), {"currency": "USD"}, {"currency": "EUR"}),
        "lora_trainable.targets": (lora_trainable, (SMALL, 4), {"targets": ("q", "v")}, {"targets": ("q",)}),
        "plan.mfu": (plan, (SMALL, "h100-80gb", Layout(), Setup(seq=8)), {"mfu": 0.4}, {"mfu": 0.5}),
        "plan.price": (plan, (SMALL, "h100-80gb", Layout(), Setup(seq=8)), {"price": 2.0}, {"price": 1.0}),
        "plan.currency": (plan, (SMALL, "h100-80gb", Layout(), Setup(seq=8)), {"currency": "USD"},
                          {"currency": "EUR"}),
        "plan.tokens": (plan, (SMALL, "h100-80gb", Layout(), Setup(seq=8)), {"tokens": None}, {"tokens": 10**5}),
        "plan.serving": (plan, (SMALL, "h100-80gb", Layout(), inf), {"serving": Serving()},
                         {"serving": Serving(chunk=16)}),
        "plan.request_tokens": (plan, (SMALL, "h100-80gb", Layout(), inf), {"request_tokens": None},
                                {"request_tokens": 8}),
        "plan.efficiency": (plan, (moe, "h100-80gb", Layout(), inf), {"efficiency": 0.75}, {"efficiency": 0.7}),
        "plan.compute_efficiency": (plan, (moe, "h100-80gb", Layout(), Setup(mode="infer", seq=4096,
                                                                              micro_batch=512)),
                                    {"compute_efficiency": 0.5}, {"compute_efficiency": 0.4}),
    }


DEFAULTS = _defaults()


@pytest.mark.parametrize("name", DEFAULTS)
def test_a_documented_default_is_the_one_used(name):
    fn, args, documented, other = DEFAULTS[name]
    assert fn(*args) == fn(*args, **documented)
    assert fn(*args, **other) != fn(*args, **documented)


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_every_data_ranks_bytes_are_whole_numbers_under_zero_3(rank):
    """Mixtral's 8 experts over 3 data ranks: chunks of 3, 3 and 2 experts; every rank's bytes stay integers."""
    from engine.plan.memory import gpu_memory
    got = gpu_memory(_small("mixtral-8x7b", 2), Layout(3, zero=3), Setup(seq=8), dp_rank=rank)
    assert all(type(v) is int for v in got.values()), got
