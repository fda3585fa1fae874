"""The tensors the planner makes beyond the model's own (LoRA adapters, a tied head copied onto the last pipeline
stage) carry the kind engine/plan/tensors.py documents for them, and that kind decides how they are stored."""
from __future__ import annotations

import pytest

from engine.plan import Layout, Setup
from engine.plan.finetune import TARGETS, adapter_tensors
from engine.plan.memory import gpu_memory
from engine.plan.parallel import stage_tensors, tp_shape
from engine.plan.quant import is_quantized
from engine.plan.tensors import KINDS, param_tensors
from engine.presets import get_preset

# tied head (Llama-3.2-1B), MoE (Mixtral), MLA + MoE (DeepSeek-V2-Lite), a recurrent hybrid (Qwen3-Next)
PRESETS = ("llama-3.2-1b", "mixtral-8x7b", "deepseek-v2-lite", "qwen3-next-80b-a3b")


@pytest.mark.parametrize("name", PRESETS)
def test_every_lora_adapter_is_of_kind_adapter_and_never_quantized(name):
    """LoRA's A and B on every target the config has: kind "adapter" (never one of the model's own kinds), and a
    plain quantizing scheme leaves them in the high precision, as peft keeps them."""
    cfg = get_preset(name).config
    triples = adapter_tensors(cfg, 8, TARGETS)
    assert triples
    for base, a, b in triples:
        assert (a.kind, b.kind) == ("adapter", "adapter"), (a, b)
        assert base.kind == "matrix" and a.layer == b.layer == base.layer
        assert not is_quantized(a, "int4-g128", ("embeddings", "head"))


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("pp", [1, 2, 4])
def test_every_pipeline_stage_tensor_has_a_documented_kind(name, pp):
    """Each stage's tensors are the model's own (same kind as param_tensors gives them) plus, for a tied head on
    the last of several stages, a copy of the embedding of kind "head"."""
    cfg = get_preset(name).config
    own = {t.name: t.kind for t in param_tensors(cfg)}
    for stage in range(pp):
        for t in stage_tensors(cfg, pp, stage):
            assert t.kind in KINDS and t.kind != "adapter", t
            if t.name in own:
                assert t.kind == own[t.name], t
            else:
                assert (t.name, t.role, t.kind, stage) == ("head.weight", "head", "head", pp - 1)


def test_a_tied_head_copied_to_the_last_stage_is_quantized_when_the_head_is():
    """Llama-3.2-1B (head tied to its 128,256 x 2,048 embedding) on 2 pipeline stages under int8: the last stage
    holds its own copy of the head, which quantize_also=("head",) stores in int8 (1 B a value + a 2 B scale per
    row) instead of bf16, saving 128,256 x 2,048 - 2 x 128,256 B there; the first stage's embedding stays bf16."""
    cfg = get_preset("llama-3.2-1b").config
    plain = Setup(mode="infer", quant="int8", seq=1)
    also = Setup(mode="infer", quant="int8", seq=1, quantize_also=("head",))
    v, d = 128_256, 2_048
    before = [gpu_memory(cfg, Layout(2, pp=2), plain, st)["weights"] for st in (0, 1)]
    after = [gpu_memory(cfg, Layout(2, pp=2), also, st)["weights"] for st in (0, 1)]
    assert after[0] == before[0]
    assert before[1] - after[1] == 2 * v * d - (v * d + 2 * v) == 262_411_776


def test_an_experts_local_shape_without_expert_parallelism_keeps_every_expert():
    """tp_shape with ep left out: no expert parallelism, so Mixtral's stacked [8, 14,336, 4,096] expert gate on
    one of 2 tensor ranks keeps all 8 experts and half of each hidden width; down is split on its input side."""
    cfg = get_preset("mixtral-8x7b").config
    experts = {t.role: t for t in param_tensors(cfg) if t.layer == 0 and t.kind == "expert"}
    assert tp_shape(experts["expert_gate"], 2) == (8, 7_168, 4_096)
    assert tp_shape(experts["expert_down"], 2) == (8, 4_096, 7_168)
    assert tp_shape(experts["expert_gate"], 2, 2) == (4, 7_168, 4_096)
