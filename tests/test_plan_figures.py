"""Figures of the budgets and the planner that a user reads, each held to a count made here: the context
crossings in the dtype asked, the roofline's device, a pipeline's KV cache stage by stage, the 70B attn_v rule of
llama.cpp's mixtures, and the serving section of `plan --json`."""
from __future__ import annotations

import pytest

from engine.budget.context_memory import crossing, crossings
from engine.budget.devices import DEVICE_PROFILES, DeviceProfile, roofline, roofline_on
from engine.plan import Layout, Setup, plan
from engine.plan.gguf import file_types
from engine.plan.memory import gpu_memory
from engine.plan.parallel import stage_layers
from engine.plan.serve import Serving
from engine.presets import get_preset

GPT2, HYBRID = get_preset("gpt2").config, get_preset("qwen3.5-9b").config


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_crossings_are_in_the_dtype_asked(dtype):
    """The Context page's device table at fp32 weights and cache: each device's first context that does not fit,
    and its all-attention twin's, are those of `crossing` in that dtype (later than bf16's for none of them)."""
    got = crossings(HYBRID, 2**22, dtype=dtype, devices=["H100", "L4"])
    for c, name in zip(got, ["H100", "L4"]):
        memory = DEVICE_PROFILES[name].memory_bytes
        assert (c.device, c.memory_bytes) == (name, memory)
        assert c.tokens == crossing(HYBRID, memory, 2**22, dtype=dtype)
    at_bf16 = crossings(HYBRID, 2**22, devices=["H100", "L4"])
    if dtype == "fp32":
        assert [c.tokens for c in got] != [c.tokens for c in at_bf16]


def test_the_roofline_names_the_device_it_places_the_model_on():
    """`budget --device-profile H100` prints each phase's verdict with the device's name."""
    roof = roofline(GPT2, "H100", 1, 1024)
    assert [(r.device, r.phase) for r in roof.values()] == [("H100", "prefill"), ("H100", "decode")]
    assert roof["decode"].verdict.startswith("decode on H100: memory-bound (")
    mine = DeviceProfile("my card", {"bf16": 1e14}, 1e12)
    assert {r.device for r in roofline_on(GPT2, mine, 1, 1024).values()} == {"my card"}


def test_pipeline_stages_hold_their_own_layers_cache():
    """Inference of a hybrid over 3 pipeline stages of 10, 11 and 11 layers: each stage's KV cache and recurrent
    state are its own layers' (2, 3 and 3 of the full-attention layers 3, 7, ..., 31), adding up to the whole
    model's on one GPU; the first stage holds less than the others."""
    s = Setup(mode="infer", seq=4096, micro_batch=2)
    whole = gpu_memory(HYBRID, Layout(), s)["kv_cache"]
    lay = Layout(pp=3)
    attn = [sum(HYBRID.layer_spec(i).attention for i in stage_layers(HYBRID, 3, st)) for st in range(3)]
    assert attn == [2, 3, 3]
    kv = [gpu_memory(HYBRID, lay, s, st)["kv_cache"] for st in range(3)]
    assert sum(kv) == whole and kv[0] < kv[1] == kv[2]


def test_a_70b_models_attn_v_takes_q5_k_where_the_mixture_gives_q3_k_or_q4_k():
    """llama_tensor_get_type: a 70B model (80 layers, GQA) raises attn_v from Q3_K or Q4_K to Q5_K (its 8 query
    heads share each kv head, so attn_v is 8x smaller than attn_q). Q4_K_M keeps Q6_K on the use_more_bits
    layers; an 80-layer model without GQA keeps the plain mixture."""
    cfg = get_preset("llama-3-70b").config
    assert (cfg.n_layers, cfg.kv_heads, cfg.n_heads) == (80, 8, 64)
    v = [f"blocks.{i}.attn.v_proj.weight" for i in range(80)]
    for ftype in ("Q3_K_S", "Q3_K_M", "Q4_K_S"):
        assert {file_types(cfg, ftype)[n] for n in v} == {"Q5_K"}, ftype
    q4km = file_types(cfg, "Q4_K_M")
    more = {i for i in range(80) if i < 10 or i >= 70 or (i - 10) % 3 == 2}   # use_more_bits(i, 80)
    assert [q4km[n] for n in v] == ["Q6_K" if i in more else "Q5_K" for i in range(80)]
    mha = file_types(cfg.replace(n_kv_heads=None), "Q4_K_S")
    assert [mha[n] for n in v] == ["Q5_K"] * 4 + ["Q4_K"] * 76            # Q4_K_S: the first 4 only


# `plan --json`'s "serving" section: the names a user scripts against, each the figure the text output prints
SERVING_KEYS = {"engine": "engine", "available_kv_bytes": "available_bytes", "page_bytes": "page_bytes",
                "blocks": "blocks", "kv_tokens": "kv_tokens", "max_context": "max_context",
                "context_limit": "context_limit", "request_tokens": "request_tokens",
                "max_concurrency": "max_concurrency", "assumptions": "assumptions", "formulas": "formulas"}


@pytest.mark.parametrize("quant,engine", [("none", "vllm"), ("gguf:Q4_K_M", "llama.cpp")])
def test_plan_json_serving_section_names_each_figure(quant, engine):
    cfg = get_preset("llama-3.2-1b").config
    p = plan(cfg, "l4-24gb", Layout(), Setup(mode="infer", seq=8192, quant=quant), serving=Serving(),
             request_tokens=4096)
    out = p.as_dict()["serving"]
    assert out == {key: getattr(p.capacity, attr) for key, attr in SERVING_KEYS.items()}
    assert out["engine"] == engine and out["page_bytes"] > 0 and out["formulas"]
