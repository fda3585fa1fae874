"""The planner (engine/plan) against independent few-line references: quantized bytes from the schemes'
published layouts, LoRA's r*(in+out), the training-state table of engine/budget/memory.py, Megatron's and
ZeRO's divisions, 1F1B's micro-batches in flight, Chinchilla's 20 tokens per parameter."""
from __future__ import annotations

import math

import pytest
import torch

from engine.budget.flops import flops_budget
from engine.budget.memory import memory_budget
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.model import DecoderLM
from engine.plan import Layout, Setup, plan, smallest_layout
from engine.plan.finetune import lora_trainable
from engine.plan.memory import gpu_memory
from engine.plan.quant import kv_quant_bytes, quantized_bytes
from engine.plan.tensors import param_tensors
from engine.presets import get_preset

LLAMA8 = get_preset("llama-3-8b").config
LLAMA70 = get_preset("llama-3-70b").config
SMALL = ModelConfig(name="small", vocab_size=64, context_length=32, d_model=32, n_layers=4, n_heads=4,
                    n_kv_heads=2, ffn="swiglu", d_ff=64, norm="rmsnorm", norm_bias=False, bias=False,
                    position="rope", tie_embeddings=False)


@pytest.mark.parametrize("cfg", [ModelConfig(), SMALL, get_preset("gemma-2-2b").config.replace(n_layers=2)])
def test_tensor_list_is_the_built_model(cfg):
    with torch.device("meta"):
        model = DecoderLM(cfg)
    assert [(t.name, t.shape) for t in param_tensors(cfg)] == [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    assert sum(t.numel for t in param_tensors(cfg)) == count_params(cfg).total


def test_quantized_bytes_follow_the_published_layouts():
    n = 4096 * 4096
    assert quantized_bytes((4096, 4096), "int8") == n + 4096 * 2                   # fp16 scale per row
    assert quantized_bytes((4096, 4096), "fp8") == n + 4
    groups = 4096 * 4096 // 128
    assert quantized_bytes((4096, 4096), "int4-g128") == n // 2 + groups * 2 + groups // 2
    # QLoRA paper: NF4 + double quantization costs 4 + 8/64 + 32/(64*256) bits per weight (+ one fp32 offset)
    assert quantized_bytes((4096, 4096), "nf4-dq") * 8 == n * (4 + 8 / 64 + 32 / (64 * 256)) + 32
    assert quantized_bytes((4096, 4096), "nf4") * 8 == n * (4 + 32 / 64)
    assert quantized_bytes((4096, 4096), "mxfp4") * 8 == n * 4.25
    # NVIDIA NVFP4: FP4 values, an FP8 E4M3 scale per 16, one fp32 global scale per tensor
    assert quantized_bytes((4096, 4096), "nvfp4") == n // 2 + n // 16 + 4
    assert quantized_bytes((3, 5), "int4-g4") == math.ceil(15 / 2) + 6 * 2 + 3   # 2 groups per row, odd sizes


def test_quantized_weights_keep_embeddings_head_and_norms_high():
    s = Setup(mode="infer", quant="int4-g128", seq=1)
    got = gpu_memory(LLAMA8, Layout(), s)["weights"]
    ref = 0
    for t in param_tensors(LLAMA8):
        if t.role in ("q", "k", "v", "o", "gate", "up", "down"):
            rows, cols = t.shape
            ref += rows * cols // 2 + rows * cols // 128 * 2 + rows * cols // 128 // 2
        else:
            ref += 2 * t.numel
    assert got == ref
    p = plan(LLAMA8, "h100-80gb", Layout(), s)
    assert p.high_precision == ["norms (bf16)", "biases (bf16)", "embeddings (bf16)", "head (bf16)"]


def test_quantized_kv_cache_counts_its_scales():
    L, B, T, K, hd = LLAMA8.n_layers, 2, 1000, LLAMA8.kv_heads, LLAMA8.head_width
    vectors = 2 * B * T * K                            # K and V, per token and kv head
    assert gpu_memory(LLAMA8, Layout(), Setup(mode="infer", micro_batch=B, seq=T))["kv_cache"] == L * vectors * hd * 2
    assert gpu_memory(LLAMA8, Layout(), Setup(mode="infer", micro_batch=B, seq=T, kv_quant="int8"))["kv_cache"] == \
        L * vectors * (hd + 2)
    assert gpu_memory(LLAMA8, Layout(), Setup(mode="infer", micro_batch=B, seq=T, kv_quant="int4"))["kv_cache"] == \
        L * vectors * (hd // 2 + 4)
    assert kv_quant_bytes([(100, 100), (100, 100)], "fp8", "bf16") == 200 + 16


def test_lora_count_is_the_design_fact():
    assert lora_trainable(LLAMA8, 16, ("q", "v")) == 6_815_744
    d, K, f, L = 4096, 1024, 14336, 32
    every = 16 * L * ((d + d) * 2 + (d + K) * 2 + (d + f) * 3)
    assert lora_trainable(LLAMA8, 16, ("q", "k", "v", "o", "gate", "up", "down")) == every


def test_full_training_on_one_gpu_is_the_memory_budget_plus_step_counters():
    s = Setup(micro_batch=2, seq=32)
    mine = gpu_memory(SMALL, Layout(), s)
    ref = memory_budget(SMALL, 2, 32, "bf16", "mixed-bf16", "adamw")
    assert mine["weights"] == ref.weights_bytes and mine["grads"] == ref.grads_bytes
    assert mine["optimizer"] == ref.optimizer_bytes + ref.master_bytes + 4 * len(param_tensors(SMALL))
    assert mine["activations"] == ref.activations_bytes


def test_zero_stages_shard_what_they_promise():
    P, n = count_params(LLAMA8).total, len(param_tensors(LLAMA8))
    per = {z: gpu_memory(LLAMA8, Layout(8, zero=z), Setup(seq=128)) for z in range(4)}
    assert per[0]["weights"] == per[3]["weights"] * 8 == 2 * P      # every dim 0 of Llama divides by 8
    assert per[1]["grads"] == 2 * P and per[2]["grads"] == 2 * P // 8
    assert per[0]["optimizer"] == 12 * P + 4 * n and per[1]["optimizer"] == 12 * P // 8 + 4 * n
    assert per[3]["working_set"] > 0 == per[2]["working_set"]


def test_tensor_parallel_splits_matrices_and_replicates_the_rest():
    s = Setup(mode="infer", seq=1)
    matrices = sum(t.numel for t in param_tensors(LLAMA8) if t.layer is not None and t.role != "norm")
    rest = count_params(LLAMA8).total - matrices
    assert gpu_memory(LLAMA8, Layout(4, tp=4), s)["weights"] == 2 * (matrices // 4 + rest)


def test_pipeline_stages_and_one_f_one_b():
    s = Setup(micro_batch=1, seq=16, micro_batches=8)
    stages = [gpu_memory(SMALL, Layout(2, pp=2), s, st) for st in range(2)]
    assert sum(m["weights"] for m in stages) == gpu_memory(SMALL, Layout(), s)["weights"]   # untied: no copy
    one = gpu_memory(SMALL, Layout(2, pp=2), Setup(micro_batch=1, seq=16, micro_batches=1), 0)
    assert stages[0]["activations"] == 2 * one["activations"]       # stage 0 of 2 holds 2 micro-batches in flight


@pytest.mark.parametrize("layout, field", [(Layout(8, tp=3), "tp"), (Layout(8, pp=8), "pp"),
                                           (Layout(6, tp=4), "gpus"), (Layout(8, zero=4), "zero")])
def test_impossible_layouts_name_the_field(layout, field):
    with pytest.raises(ValueError, match=rf"\b{field}: "):
        plan(SMALL.replace(n_layers=4, n_heads=4, n_kv_heads=4), "h100-80gb", layout, Setup(seq=16))


def test_cost_chinchilla_for_pretraining_and_a_budget_for_fine_tuning():
    t = plan(LLAMA8, "h100-80gb", Layout(8), Setup(seq=1024), tokens=10**9, mfu=0.5, price=3, currency="EUR")
    assert t.cost.train_seconds == pytest.approx(t.cost.flops_per_token * 1e9 / (8 * 989.4e12 * 0.5))
    assert t.cost.train_cost == pytest.approx(t.cost.train_seconds / 3600 * 8 * 3) and t.cost.currency == "EUR"
    assert 6 * count_params(LLAMA8).non_embedding < t.cost.flops_per_token   # 6N plus attention
    pre = plan(LLAMA8, "h100-80gb", Layout(8), Setup(seq=1024))
    assert pre.cost.token_budget == "chinchilla" and pre.cost.train_tokens == 20 * count_params(LLAMA8).total
    lora = plan(LLAMA8, "h100-80gb", Layout(1), Setup(seq=1024, finetune="lora"))
    assert lora.cost.train_tokens is None and lora.cost.train_seconds is None     # no Chinchilla for a fine-tune
    assert any("token budget" in n for n in lora.notes)
    given = plan(LLAMA8, "h100-80gb", Layout(1), Setup(seq=1024, finetune="lora"), tokens=10**8)
    assert given.cost.token_budget == "given" and given.cost.train_tokens == 10**8
    # without a budget the fine-tune is unpriced, but its FLOPs per token (2 passes) and the Chinchilla figure
    # shown beside the token input are the same as with one
    unpriced, priced = lora.cost.as_dict(), given.cost.as_dict()
    for key in ("flops_per_token", "currency", "chinchilla_tokens"):
        assert unpriced[key] == priced[key], key
    assert lora.cost.chinchilla_tokens == 20 * count_params(LLAMA8).total
    assert lora.cost.flops_per_token == pytest.approx(2 / 3 * t.cost.flops_per_token)
    infer = plan(LLAMA8, "h100-80gb", Layout(8), Setup(mode="infer", seq=1024))
    assert infer.cost is None and infer.as_dict()["cost"] is None                  # no training time in inference


def test_qlora_70b_fits_one_h100_with_recompute_and_smallest_layout_fits():
    s = Setup(finetune="qlora", seq=1024, recompute="full")
    p = plan(LLAMA70, "h100-80gb", Layout(), s)
    assert p.setup.quant == "nf4-dq" and p.fits and p.margin_bytes == p.memory_bytes - p.per_gpu["total"]
    full = Setup(seq=2048, recompute="full")
    best = smallest_layout(LLAMA8, "h100-80gb", full)
    assert best is not None and best.fits and best.layout.gpus == 2
    assert not plan(LLAMA8, "h100-80gb", Layout(), full).fits


def test_moe_experts_are_quantized_and_split_by_expert_parallelism():
    cfg = get_preset("mixtral-8x7b").config
    experts = [t for t in param_tensors(cfg) if t.role.startswith("expert_")]
    routers = [t for t in param_tensors(cfg) if t.role == "router"]
    assert len(experts) == 3 * cfg.n_layers and len(routers) == cfg.n_layers
    E, f, d = experts[0].shape
    s = Setup(mode="infer", seq=1, quant="int8")
    one, ep8 = (gpu_memory(cfg, Layout(8, ep=ep), s)["weights"] for ep in (1, 8))
    # int8: one byte per value + an fp16 scale per output row (gate, up: f rows; down: d rows)
    assert one - ep8 == cfg.n_layers * (E - E // 8) * (3 * f * d + 2 * (2 * f + d))
    assert routers[0].shape == (8, 4096) and not any(r.role in ("q", "up") for r in routers)
    with pytest.raises(ValueError, match=r"ep: 3 must divide n_experts = 8"):
        plan(cfg, "h100-80gb", Layout(3, ep=3), s)


def test_lora_training_compute_has_no_weight_gradients():
    full = plan(LLAMA8, "h100-80gb", Layout(8), Setup(seq=1024), tokens=10**9).cost
    lora = plan(LLAMA8, "h100-80gb", Layout(8), Setup(seq=1024, finetune="lora"), tokens=10**9).cost
    assert lora.flops_per_token * 3 == pytest.approx(full.flops_per_token * 2)   # 2 passes of 3


def test_as_dict_is_the_plan_in_json():
    """`python -m engine plan --json` prints as_dict(): every figure of the plan under its own name."""
    import json
    p = plan(LLAMA8, "h100-80gb", Layout(8, tp=2, pp=2, zero=1), Setup(seq=1024, micro_batches=4))
    d = json.loads(json.dumps(p.as_dict()))
    bytes_of = lambda m: {f"{k}_bytes": v for k, v in m.items()}   # noqa: E731  (the CLI names bytes *_bytes)
    assert d["per_gpu"] == bytes_of(p.per_gpu) and d["per_stage"] == [bytes_of(m) for m in p.per_stage]
    assert len(d["per_stage"]) == 2 and d["per_gpu"]["total_bytes"] == p.memory_bytes - p.margin_bytes
    assert (d["fits"], d["margin_bytes"], d["memory_bytes"]) == (p.fits, p.margin_bytes, p.memory_bytes)
    assert d["layout"] == {"gpus": 8, "dp": 2, "tp": 2, "pp": 2, "ep": 1, "zero": 1, "sequence_parallel": False}
    assert d["trainable_params"] == count_params(LLAMA8).total and d["cost"] == p.cost.as_dict()
    assert d["high_precision"] == p.high_precision and d["notes"] == p.notes


@pytest.mark.parametrize("batch", [1, 4])
def test_training_flops_per_token_are_three_forward_passes_of_one_token_whatever_the_batch(batch):
    """C = 3 * forward FLOPs per token (forward + 2x backward): a forward over `batch` sequences, divided by the
    tokens it saw, is the per-token figure, so the plan's number cannot depend on the serving batch."""
    seq = 1024
    p = plan(LLAMA8, "h100-80gb", Layout(8), Setup(seq=seq, micro_batch=batch), tokens=10**9)
    fwd = flops_budget(LLAMA8, 3, seq, causal=True).forward_flops
    assert p.cost.flops_per_token == pytest.approx(3 * fwd / (3 * seq), rel=1e-12)


def test_full_training_ignores_the_lora_fields():
    """The LoRA rank and targets only apply to lora/qlora; a full run with them cleared is a valid setup (the
    Planner hides those fields then), and the same values under LoRA are refused naming each field."""
    from engine.plan import setup_problems
    assert setup_problems(Setup(finetune="full", lora_rank=0, lora_targets=())) == []
    assert [p.split(":")[0] for p in setup_problems(Setup(finetune="lora", lora_rank=0, lora_targets=()))] == \
        ["lora_targets", "lora_rank"]


def test_tp_that_does_not_divide_the_heads_names_them():
    from engine.plan.parallel import layout_problems
    assert "tp: 3 does not divide n_heads = 32" in layout_problems(LLAMA8, Layout(3, tp=3))


def test_every_cost_formula_names_a_figure_of_the_cost():
    """The Planner shows each cost figure with its formula, looked up by the figure's name."""
    c = plan(LLAMA8, "h100-80gb", Layout(8), Setup(seq=1024), tokens=10**9).cost
    assert "train_flops" in c.formulas and set(c.formulas) <= set(c.as_dict()) - {"formulas"}


def test_a_model_that_fills_the_gpu_exactly_fits_and_the_search_agrees(monkeypatch):
    """The fit is total <= memory: a GPU exactly as large as one GPU's total holds it, and smallest_layout
    answers one GPU, as plan() does."""
    from dataclasses import replace

    import engine.plan as planner
    s = Setup(mode="infer", seq=1024)
    total = plan(LLAMA8, "h100-80gb", Layout(), s).per_gpu["total"]
    exact = replace(planner.DEVICE_PROFILES["H100"], memory_bytes=total)
    monkeypatch.setitem(planner.DEVICE_PROFILES, "H100", exact)
    assert plan(LLAMA8, "h100-80gb", Layout(), s).fits
    assert smallest_layout(LLAMA8, "h100-80gb", s).layout == Layout()
    monkeypatch.setitem(planner.DEVICE_PROFILES, "H100", replace(exact, memory_bytes=total - 1))
    assert not plan(LLAMA8, "h100-80gb", Layout(), s).fits
    assert smallest_layout(LLAMA8, "h100-80gb", s).layout.gpus == 2


def test_cost_per_million_tokens_is_the_gpu_hours_they_take():
    """Serving cost: GPUs x price per GPU-hour / tokens per hour, per million tokens."""
    p = plan(LLAMA8, "h100-80gb", Layout(2), Setup(mode="infer", seq=1024), price=3.0)
    tokens_per_hour = p.speed.total * 60 * 60
    assert p.cost_per_million == pytest.approx(2 * 3.0 / tokens_per_hour * 1_000_000, rel=1e-12)


def test_quantize_also_quantizes_only_the_embeddings_or_head_it_names():
    """int4-g128 with quantize_also=("embeddings",): the 128,256 x 4,096 token embedding joins the matrices in
    int4 (0.5 B a value + a 2 B scale and a 0.5 B zero per 128), the head stays bf16 and the plan says so."""
    from dataclasses import replace

    s = Setup(mode="infer", quant="int4-g128", seq=1)
    emb = 128_256 * 4096
    plain = gpu_memory(LLAMA8, Layout(), s)["weights"]
    also = replace(s, quantize_also=("embeddings",))
    assert gpu_memory(LLAMA8, Layout(), also)["weights"] == plain - 2 * emb + emb // 2 + emb // 128 * 2 + emb // 256
    assert plan(LLAMA8, "h100-80gb", Layout(), also).high_precision == ["norms (bf16)", "biases (bf16)", "head (bf16)"]
    assert gpu_memory(LLAMA8, Layout(), replace(s, quantize_also=("embeddings", "head")))["weights"] == \
        plain - 2 * (2 * emb) + 2 * (emb // 2 + emb // 128 * 2 + emb // 256)


def test_lora_plan_reports_the_adapters_as_its_trainable_parameters():
    """LoRA r=8 on q and v of Llama-3-8B: 32 x 8 x ((4,096 + 4,096) + (4,096 + 1,024)) = 3,407,872 trainable
    parameters, what peft's print_trainable_parameters shows for it; full fine-tuning trains every parameter."""
    lora = plan(LLAMA8, "h100-80gb", Layout(), Setup(finetune="lora", lora_rank=8, lora_targets=("q", "v"), seq=512))
    assert lora.trainable == 32 * 8 * ((4096 + 4096) + (4096 + 1024)) == 3_407_872
    assert lora.as_dict()["trainable_params"] == 3_407_872


def test_a_published_checkpoint_without_mtp_modules_gets_a_plain_note():
    """gpt-oss-20b ships in MXFP4 and holds no multi-token-prediction module: its note says what it ships as and
    no word of speculative decoding."""
    oss = get_preset("gpt-oss-20b").config
    assert plan(oss, "h100-80gb", Layout(), Setup(mode="infer", quant="checkpoint", seq=64)).notes == \
        ["gpt-oss-20b as published: mxfp4, 12.82 GiB of weights"]


def test_smallest_layout_picks_zero_3_when_it_holds_the_least():
    """Full training of Llama-3-8B on 24 GB RTX 4090s first fits at 8 GPUs; of the layouts that fit there, ZeRO-3
    over 4 data ranks and 2 pipeline stages holds the least per GPU (17.4 GiB; the best ZeRO-2 one needs 20.1)."""
    s = Setup(seq=2048, recompute="full")
    best = smallest_layout(LLAMA8, "rtx-4090-24gb", s)
    assert best.layout == Layout(8, tp=1, pp=2, zero=3) and best.fits
    zero2 = plan(LLAMA8, "rtx-4090-24gb", Layout(8, tp=1, pp=4, zero=2), s)
    assert zero2.fits and best.per_gpu["total"] < zero2.per_gpu["total"]


def test_smallest_layout_takes_zero_3_over_two_data_ranks_when_nothing_else_fits_two_gpus():
    """Full training of Gemma-2-2B (seq 512, full recompute) on 24 GiB RTX 4090s: one GPU needs 39.6 GiB; on two,
    plain data parallelism, ZeRO-1, tp 2 and 2 pipeline stages all need more than a card holds; ZeRO-2 (22.6 GiB)
    and ZeRO-3 (20.6 GiB) over the 2 data ranks fit, and ZeRO-3 holds the least: the answer, not a 4-GPU layout."""
    s = Setup(seq=512, recompute="full")
    best = smallest_layout(get_preset("gemma-2-2b").config, "rtx-4090-24gb", s)
    assert best.layout == Layout(2, tp=1, pp=1, zero=3) and best.fits
    assert best.per_gpu["total"] == pytest.approx(20.57 * 2**30, rel=1e-3)
    assert not plan(get_preset("gemma-2-2b").config, "rtx-4090-24gb", Layout(2, tp=2), s).fits


@pytest.mark.parametrize("name, setup", [
    ("mixtral-8x7b", Setup(mode="infer", seq=64)),
    ("llama-3-8b", Setup(seq=64, finetune="lora", lora_targets=("q", "k", "v", "o", "gate", "up", "down")))])
def test_byte_counts_are_whole_numbers_under_tensor_parallelism(name, setup):
    """Mixtral split over 2 tensor ranks (each expert's halves are whole matrices), and Llama-3-8B's LoRA
    adapters on every matrix split with them (lora_B of a column-split matrix, lora_A of a row-split one): every
    per-GPU figure that `plan --json` prints is an integer number of bytes (never 1.23e10 or 123.0)."""
    import json
    p = plan(get_preset(name).config, "h100-80gb", Layout(2, tp=2), setup)
    assert all(type(v) is int for v in p.per_gpu.values())
    assert "." not in json.dumps(p.as_dict()["per_gpu"])


def test_smallest_layout_splits_a_layer_too_wide_for_four_gpus_eight_ways():
    """A one-layer model of 207B parameters (a 4M-wide FFN): pipeline stages cannot split one layer, 4-way tensor
    parallelism leaves 103 GB of bf16 weights per H100, and an 8-GPU node's tp 8 (52.7 GB each) is the answer."""
    wide = ModelConfig(name="wide", vocab_size=32000, n_layers=1, d_model=16384, n_heads=128, n_kv_heads=8,
                       ffn="swiglu", d_ff=4_194_304, norm="rmsnorm", position="rope")
    p = smallest_layout(wide, "h100-80gb", Setup(mode="infer", seq=2048))
    assert (p.layout.gpus, p.layout.tp, p.layout.pp) == (8, 8, 1) and p.fits
    assert not plan(wide, "h100-80gb", Layout(4, tp=4), Setup(mode="infer", seq=2048)).fits


@pytest.mark.parametrize("kv", ["none", "fp8", "int8", "int4", "q8_0", "q4_0"])
def test_a_quantized_kv_cache_is_a_whole_byte_count(kv):
    """`plan --json` prints the KV cache as an integer number of bytes under every cache format (never 71303168.0);
    a scale is stored per whole group: 100 values in groups of 64 are 1 group, so 1 int8 scale of 2 bytes and 1
    int4 scale and zero of 4 bytes."""
    p = plan(LLAMA8, "h100-80gb", Layout(), Setup(mode="infer", kv_quant=kv)).as_dict()
    assert type(p["per_gpu"]["kv_cache_bytes"]) is int
    assert kv_quant_bytes([(100, 64)], "int8", "bf16") == 102 and kv_quant_bytes([(100, 64)], "int4", "bf16") == 54


def test_serving_a_lora_model_gathers_no_gradients():
    """Inference with a LoRA adapter under ZeRO-3: the working set is two gathered bf16 Llama-3-8B blocks
    (218,112,000 parameters each), with no adapter gradients (nothing is trained)."""
    mem = gpu_memory(LLAMA8, Layout(gpus=2, zero=3), Setup(mode="infer", finetune="lora"))
    assert mem["working_set"] == 2 * 218_112_000 * 2
