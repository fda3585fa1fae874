"""The texts the app and the CLI print beside the numbers (formulas, notes, labels, bound names, tensor names and
roles), for every preset and for the settings that switch the conditional ones on, held in
tests/golden/engine_texts.json (tests/golden.py: a reviewed spec). The numbers are held against references
elsewhere; here only what a user reads. Where a text is a word with a meaning (a bound, a token budget, a tensor's
role, an adapter's name), a test below holds it against an independent reference instead of the stored copy."""
from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from engine.budget.activations import activation_estimate
from engine.budget.context_memory import all_attention, crossings
from engine.budget.devices import DEVICE_PROFILES, GPUS
from engine.budget.flops import arithmetic_intensity, flops_budget, gap_note
from engine.budget.memory import memory_budget
from engine.budget.params import count_params
from engine.layers.block import block_layout
from engine.layers.layer_map import layer_map
from engine.layers.mixers import MIXERS, layer_groups, layer_kinds, spec_label
from engine.layers.position import rope_scaling_text
from engine.plan import Layout, Setup, plan
from engine.plan.cost import CHINCHILLA_TOKENS_PER_PARAM, cost
from engine.plan.finetune import TARGETS, adapter_tensors
from engine.plan.speed import speed
from engine.plan.tensors import param_tensors
from engine.presets import PRESETS
from tests.golden import check_golden

B, T = 2, 8192          # a context past every sliding window, so the min(T, window) terms show
GPU = "h100-80gb"
ODD = re.compile(r"\bNone\b|\bnan\b|\binf\b")   # what a dropped value or a broken format prints


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def check_held(key: str, texts) -> None:
    """Every text reads without a placeholder, then equals the reviewed one."""
    for text in _strings(texts):
        assert not ODD.search(text), f"{key}: {ODD.search(text).group()!r} in {text!r}"
    check_golden("engine_texts", key, texts)


def _layer_pattern(name: str) -> str:
    return re.sub(r"^blocks\.\d+\.", "blocks.*.", name)


@pytest.mark.parametrize("name", PRESETS)
def test_budget_texts(name):
    cfg = PRESETS[name].config
    check_held(f"budget/{name}", {
        "flops_causal": flops_budget(cfg, B, T, causal=True).formulas,
        "flops_full_square": flops_budget(cfg, B, T).formulas["attention_flops"],
        "intensity": {k: [v.phase, v.formula] for k, v in arithmetic_intensity(cfg, B, T).items()},
        "gap_note": gap_note(cfg, T),
        "memory": memory_budget(cfg, B, T).formulas,
    })


@pytest.mark.parametrize("name", PRESETS)
def test_layer_texts(name):
    """Layer kinds in words (the strip, the tables), each mixer's summary lines, the attention temperature and
    what RoPE scaling does within and beyond the trained context."""
    cfg = PRESETS[name].config
    lm = layer_map(cfg)
    L0 = cfg.rope_original_context or cfg.context_length
    kinds = {k for spec, _ in layer_groups(cfg) for k in spec.mixers}
    check_held(f"layers/{name}", {
        "kinds": layer_kinds(cfg),
        "labels": sorted({spec_label(spec) for spec, _ in layer_groups(cfg)}),
        "mixer_rows": [[r.key, r.label, r.ranges] for r in lm.mixers],
        "ffn_rows": [[r.key, r.label, r.ranges] for r in lm.ffns],
        "summaries": {k: MIXERS[k].summary(cfg) for k in sorted(kinds)},
        "temperature": block_layout(cfg).temperature,
        "rope_within": rope_scaling_text(cfg, L0),
        "rope_beyond": rope_scaling_text(cfg, 4 * L0),
        "all_attention": all_attention(cfg).name,
    })


# Building a model on the meta device costs a tenth of a second or more, so the tensor and planner texts take one
# preset of each kind of tensor naming and planner note: learned positions and biases, a parallel block, shared
# experts and their gate, sinks and a published MXFP4 checkpoint, MLA with sparse attention and an FP8 checkpoint,
# Gated DeltaNet with MoE, Kimi Delta Attention, Mamba-1, Mamba-2 with FFN-only layers, sliding windows and
# sandwich norms, chunked attention with a temperature, OLMo-2's norms after the branches, LongRoPE.
KINDS = ("gpt2", "llama-3-8b", "falcon-7b", "qwen1.5-moe-a2.7b", "gpt-oss-20b", "deepseek-v3.2", "qwen3.5-35b-a3b",
         "kimi-linear-48b-a3b", "jamba-v0.1", "nemotron-h-8b", "gemma-3-27b", "llama-4-scout-17b-16e", "olmo-2-7b",
         "phi-3.5-mini")


@pytest.mark.parametrize("name", KINDS)
def test_tensor_names(name):
    """Every tensor's name (layers folded to blocks.*) with its role, and the LoRA adapters on every target."""
    cfg = PRESETS[name].config
    roles: dict[str, list[str]] = {}
    for t in param_tensors(cfg):
        roles.setdefault(_layer_pattern(t.name), [])
        if t.role not in roles[_layer_pattern(t.name)]:
            roles[_layer_pattern(t.name)].append(t.role)
    adapters = sorted({(_layer_pattern(a.name), a.role, _layer_pattern(b.name), b.role)
                       for _, a, b in adapter_tensors(cfg, 4, TARGETS)})
    check_held(f"tensors/{name}", {"roles": roles, "adapters": adapters})


def _plan_texts(p) -> dict:
    out = {"notes": p.notes, "high_precision": p.high_precision, "storage": list(p.weights_by_storage)}
    if p.cost is not None:
        out["cost"] = {"token_budget": p.cost.token_budget, "formulas": p.cost.formulas}
    if p.capacity is not None:
        out["capacity"] = {"engine": p.capacity.engine, "context_limit": p.capacity.context_limit,
                           "formulas": p.capacity.formulas}
    if p.speed is not None:
        out["speed"] = {"bound": p.speed.bound, "formulas": p.speed.formulas}
    return out


@pytest.mark.parametrize("name", KINDS)
def test_plan_texts(name):
    """Pre-training (Chinchilla's budget), a LoRA fine-tune without a budget (its notes), QLoRA with a given
    budget (what stays unquantized) and inference under vLLM and under llama.cpp."""
    cfg = PRESETS[name].config
    lay = Layout()
    check_held(f"plan/{name}", {
        "pretrain": _plan_texts(plan(cfg, GPU, lay, Setup(seq=4096))),
        "lora": _plan_texts(plan(cfg, GPU, lay, Setup(seq=4096, finetune="lora"))),
        "qlora_given": _plan_texts(plan(cfg, GPU, lay, Setup(seq=4096, finetune="qlora"), tokens=10**9)),
        "infer": _plan_texts(plan(cfg, GPU, lay, Setup(mode="infer", seq=4096))),
        "infer_gguf": _plan_texts(plan(cfg, GPU, lay, Setup(mode="infer", seq=4096, quant="gguf:Q4_K_M"))),
        "checkpoint": _plan_texts(plan(cfg, GPU, lay, Setup(mode="infer", seq=4096, quant="checkpoint")))
        if cfg.ckpt_format != "none" else None,
    })


SMALL = PRESETS["qwen3-0.6b"].config


@pytest.mark.parametrize("setting", ["fp32-sgd-selective", "bf16-momentum-full", "dynamic-rope", "crossings",
                                     "sliding-window"])
def test_setting_texts(setting):
    """Texts only some settings print: other precisions, optimizers and recompute (and explicit attention); dynamic
    RoPE scaling; the memory crossings of pooled GPUs; a sliding window on every layer."""
    if setting == "fp32-sgd-selective":
        texts = memory_budget(SMALL, B, T, "fp32", "fp32", "sgd", "selective").formulas
    elif setting == "bf16-momentum-full":
        texts = {**memory_budget(SMALL, B, T, "bf16", "bf16", "sgd-momentum", "full").formulas,
                 "explicit": activation_estimate(SMALL, 1, 16, "fp32", "explicit").formula}
    elif setting == "dynamic-rope":
        cfg = SMALL.replace(rope_scaling="dynamic", rope_factor=4.0)
        texts = [rope_scaling_text(cfg, 1000), rope_scaling_text(cfg, 4 * cfg.context_length)]
    elif setting == "crossings":
        texts = [c.device for c in crossings(PRESETS["qwen3-next-80b-a3b"].config, 2**20, gpus=2,
                                             devices=[GPUS[GPU]])]
    else:
        cfg = SMALL.replace(attn_window=1024)
        texts = {"flops": flops_budget(cfg, B, T, causal=True).formulas["attention_flops"],
                 "kv": memory_budget(cfg, B, T).formulas["kv_cache_bytes"], "gap": gap_note(cfg, T)}
    check_held(f"setting/{setting}", texts)


# -- words with a meaning, against references of their own --------------------------------------------------


@pytest.mark.parametrize("batch", [1, 4096])
def test_speed_bound_is_the_roofline_side(batch):
    """'compute' exactly when the decode step's arithmetic intensity (FLOPs per byte read) reaches the machine's
    balance point (peak x compute efficiency per bandwidth x bandwidth efficiency); batch 1 reads every weight
    for 2 FLOPs each (memory-bound on any GPU), 4,096 sequences at a short context do 2 x 4,096 FLOPs per weight
    read (compute-bound on an H100)."""
    cfg, dev = PRESETS["llama-3-8b"].config, DEVICE_PROFILES[GPUS[GPU]]
    s = Setup(mode="infer", seq=16, micro_batch=batch)
    sp = speed(cfg, dev, Layout(), s, batch, 16)
    balance = dev.peak_flops["bf16"] * 0.5 / (dev.mem_bandwidth * 0.75)
    intensity = sp.flops / (sp.weight_bytes + sp.kv_bytes)
    assert sp.bound == ("compute" if intensity >= balance else "memory")
    assert sp.bound == ("memory" if batch == 1 else "compute")


def test_token_budget_names_where_the_tokens_come_from():
    """Cost.token_budget: 'given' (the caller's D), 'chinchilla' (pre-training's 20 tokens per parameter) or
    'none' (a fine-tune without a budget: not priced)."""
    cfg, dev = PRESETS["qwen3-0.6b"].config, DEVICE_PROFILES[GPUS[GPU]]
    given = cost(cfg, dev, 8, 2048, 10**9, 0.4, 2.0)
    chinchilla = cost(cfg, dev, 8, 2048, None, 0.4, 2.0)
    unpriced = cost(cfg, dev, 8, 2048, None, 0.4, 2.0, frozen_base=True)
    assert (given.token_budget, given.train_tokens) == ("given", 10**9)
    assert (chinchilla.token_budget, chinchilla.train_tokens) == (
        "chinchilla", CHINCHILLA_TOKENS_PER_PARAM * count_params(cfg).total)
    assert (unpriced.token_budget, unpriced.train_tokens, unpriced.train_cost) == ("none", None, None)
    assert cost(cfg, dev, 8, 2048, 10**9, 0.4, 2.0, frozen_base=True).token_budget == "given"


@pytest.mark.parametrize("name", ["gpt2", "llama-3-8b", "gemma-2-2b", "qwen3-30b-a3b"])
def test_tensor_roles_add_up_to_the_parameter_count(name):
    """The roles the planner quantizes, splits and keeps by group the same parameters as count_params' components:
    the token embedding, the learned positions (GPT-2) and an untied head each under their own role."""
    cfg = PRESETS[name].config
    comps = count_params(cfg).components
    by_role: dict[str, int] = {}
    for t in param_tensors(cfg):
        by_role[t.role] = by_role.get(t.role, 0) + t.numel
    assert by_role.get("embedding", 0) == comps["token_embedding"]
    assert by_role.get("positions", 0) == comps["positions"]
    assert by_role.get("head", 0) == comps["output_head"]
    assert by_role.get("router", 0) == comps["router"]
    assert sum(by_role.get(f"expert_{p}", 0) for p in ("gate", "up", "down")) == comps["routed_experts"]


def _peft_adapter_names() -> tuple[str, str]:
    """peft's LoraLayer.adapter_layer_names, read from its source (importing peft costs seconds)."""
    spec = importlib.util.find_spec("peft")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("peft is not installed")
    source = Path(spec.submodule_search_locations[0], "tuners", "lora", "layer.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == "LoraLayer":
            for stmt in node.body:
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(stmt, "target", None)
                if getattr(target, "id", "") == "adapter_layer_names":
                    return tuple(ast.literal_eval(stmt.value)[:2])
    raise AssertionError("peft's LoraLayer.adapter_layer_names not found")


def test_adapter_names_and_shapes_are_peft_s():
    """Each adapter is named as peft names its weights (module.lora_A.weight, module.lora_B.weight, less peft's
    adapter name) with peft's shapes: A (r, in), B (out, r), in the layer of the matrix it adapts."""
    a_name, b_name = _peft_adapter_names()
    cfg = PRESETS["llama-3-8b"].config
    found = adapter_tensors(cfg, 8, ("q", "down"))
    assert len(found) == 2 * cfg.n_layers
    for base, a, b in found:
        out, inp = base.shape
        module = base.name.removesuffix(".weight")
        assert (a.name, a.shape, a.role, a.layer) == (f"{module}.{a_name}.weight", (8, inp), f"{a_name}.{base.role}",
                                                      base.layer)
        assert (b.name, b.shape, b.role, b.layer) == (f"{module}.{b_name}.weight", (out, 8), f"{b_name}.{base.role}",
                                                      base.layer)
