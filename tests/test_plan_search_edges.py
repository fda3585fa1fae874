"""smallest_layout at the top of each axis it searches: a model that fits only with pp = 16 (16 layers, 3 heads,
a KV cache only pipeline stages split), only with tp = 8 (8 heads, 1 layer), only with ZeRO-3 (a large embedding
only weight sharding splits), each on a GPU exactly as large as that layout's busiest GPU needs; and max_gpus as
the last count tried."""
from __future__ import annotations

from dataclasses import replace

import pytest

import engine.plan as planner
from engine.config import ModelConfig
from engine.plan import Layout, Setup, smallest_layout
from engine.plan.memory import gpu_memory

BASE = dict(name="edge", vocab_size=64, context_length=8192, d_model=48, ffn="swiglu", d_ff=64, norm="rmsnorm",
            norm_bias=False, bias=False, position="rope", tie_embeddings=False)
CASES = {
    "pp16": (ModelConfig(**BASE, n_layers=16, n_heads=3), Setup(mode="infer", seq=8192), Layout(16, 1, 16)),
    "tp8": (ModelConfig(**{**BASE, "d_model": 64}, n_layers=1, n_heads=8), Setup(mode="infer", seq=8192),
            Layout(8, 8, 1)),
    "zero3": (ModelConfig(**{**BASE, "vocab_size": 32768}, n_layers=1, n_heads=1), Setup(seq=8),
              Layout(2, 1, 1, zero=3)),
}


def exact_gpu(monkeypatch, cfg, s, lay):
    """An H100 with exactly the memory `lay`'s busiest GPU needs."""
    need = max(gpu_memory(cfg, lay, s, st)["total"] for st in range(lay.pp))
    monkeypatch.setitem(planner.DEVICE_PROFILES, "H100", replace(planner.DEVICE_PROFILES["H100"], memory_bytes=need))
    return need


@pytest.mark.parametrize("case", list(CASES))
def test_a_model_that_fits_only_at_the_top_of_an_axis_is_found_there(monkeypatch, case):
    cfg, s, lay = CASES[case]
    need = exact_gpu(monkeypatch, cfg, s, lay)
    best = smallest_layout(cfg, "h100-80gb", s)
    assert best is not None and best.layout == lay and best.per_gpu["total"] == need and best.fits


@pytest.mark.parametrize("case", list(CASES))
def test_max_gpus_is_the_last_count_tried(monkeypatch, case):
    cfg, s, lay = CASES[case]
    exact_gpu(monkeypatch, cfg, s, lay)
    assert smallest_layout(cfg, "h100-80gb", s, max_gpus=lay.gpus).layout == lay
    assert smallest_layout(cfg, "h100-80gb", s, max_gpus=lay.gpus - 1) is None


def test_zero_1_is_answered_when_zero_2_saves_the_busiest_gpu_nothing(monkeypatch):
    """LoRA on (GDN, attention) in two stages: the busiest GPU is stage 0 (the GDN layer and the embedding), whose
    layer has no q/v and so no adapter. ZeRO-1 shards stage 1's AdamW state enough to bring it under stage 0;
    ZeRO-2 also shards stage 1's adapter grads, which lowers no GPU that binds. With memory for exactly ZeRO-1's
    busiest GPU, the search answers 4 GPUs at ZeRO-1, the least sharding that reaches it (ZeRO-0 does not fit)."""
    cfg = ModelConfig(name="e", vocab_size=64, context_length=1024, d_model=64, n_layers=2, n_heads=1, d_ff=96,
                      ffn="swiglu", norm="rmsnorm", position="rope", tie_embeddings=False,
                      layer_types=("gdn", "full"))
    s = Setup(finetune="lora", lora_rank=8, seq=8)
    per_stage = {z: [gpu_memory(cfg, Layout(4, 1, 2, z), s, st)["total"] for st in range(2)] for z in (0, 1, 2)}
    assert per_stage[1][0] == per_stage[2][0] > per_stage[1][1] > per_stage[2][1]   # stage 0 binds, unchanged
    assert max(per_stage[0]) > per_stage[1][0]
    need = exact_gpu(monkeypatch, cfg, s, Layout(4, 1, 2, 1))
    best = smallest_layout(cfg, "h100-80gb", s)
    assert best.layout == Layout(4, 1, 2, 1) and best.per_gpu["total"] == need
