"""Every layout the planner accepts, not only the defaults: for each combination of data (ZeRO 0-3), tensor,
pipeline and expert parallelism (and sequence parallelism) on a dense, a tied and a MoE config, the planner's
per-GPU bytes == a hand count from the built model's parameters, by name:
  PP    Megatron's even split: stage s holds blocks [s*L//pp, (s+1)*L//pp), the embeddings on the first stage, the
        final norm and head on the last (a tied head is a second copy there when pp > 1);
  TP    Megatron: q/k/v/gate/up split by output rows (and their biases), o/down by input columns, the rest
        replicated; routed experts [E, f, d] split their hidden width f;
  EP    routed experts divided among ep ranks (E/ep each), ZeRO then over the dp/ep ranks holding the same ones;
  ZeRO  dim-0 chunks as torch.chunk cuts them (ceil(n0/dp) rows, the last rank the remainder); ZeRO-1 shards the
        optimizer (with the fp32 master), ZeRO-2 also gradients, ZeRO-3 also weights (Rajbhandari et al. 2020);
  bytes mixed-bf16 AdamW: 2 (bf16 weight) + 2 (bf16 grad) + 12 (fp32 master and two moments) per parameter, plus
        a 4-byte step counter per tensor; the KV cache 2 * B * T * (kv_heads/tp) * head_dim * 2 bytes per layer;
        int8 weights (LLM.int8 per-channel): 1 byte each + an fp16 scale per output row of the slice a GPU holds,
        so which dimension TP splits shows in the bytes;
  1F1B  stage s holds min(pp - s, m) micro-batches of activations (Narayanan et al. 2021); TP divides all but the
        norms' saved inputs, sequence parallelism those too (Korthikanti et al. 2022).
The layout's acceptance is held to the same rules: everything divides, ep needs experts, pp <= layers."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from engine.budget.activations import activation_estimate
from engine.config import ModelConfig
from engine.layers.block import block_norm_count
from engine.layers.norm import norm_saved_bytes
from engine.model import DecoderLM
from engine.plan import Layout, Setup
from engine.plan.memory import gpu_memory
from engine.plan.parallel import layout_problems

BASE = dict(vocab_size=50, context_length=32, d_model=32, n_layers=4, n_heads=4, n_kv_heads=2, ffn="swiglu",
            d_ff=64, norm="rmsnorm", norm_bias=False)
CONFIGS = {
    "dense": ModelConfig(name="dense", bias=True, tie_embeddings=False, position="rope", **BASE),   # biases; 50 rows
    # a tied head (a second copy on the last stage), learned positions and an embedding norm (the first stage's)
    "tied": ModelConfig(name="tied", bias=False, tie_embeddings=True, position="learned", embed_norm=True, **BASE),
    "moe": ModelConfig(name="moe", bias=False, tie_embeddings=False, position="rope", n_experts=4, experts_per_token=2,
                       expert_d_ff=16, n_shared_experts=1, shared_d_ff=32, moe_first_dense=1, **BASE),
}
COLUMN = ("q_proj", "k_proj", "v_proj", "gate", "up")
ROW = ("o_proj", "down")
GRID = [Layout(g, tp, pp, zero, sp, ep) for g, tp, pp, zero, sp, ep in
        itertools.product((1, 2, 4, 8), (1, 2, 4), (1, 2, 4), (0, 1, 2, 3), (False, True), (1, 2, 4))]


def accepted(cfg: ModelConfig, lay: Layout) -> bool:
    """The rules, written out: GPUs = dp * tp * pp; tp divides the heads, kv heads and FFN widths in use; ep
    divides the experts and dp, and needs experts; no more stages than layers."""
    if lay.gpus % (lay.tp * lay.pp):
        return False
    dp = lay.gpus // (lay.tp * lay.pp)
    widths = [cfg.n_heads, cfg.kv_heads, cfg.d_ff] + ([cfg.expert_d_ff, cfg.shared_d_ff] if cfg.n_experts else [])
    experts_ok = lay.ep == 1 or (cfg.n_experts is not None and cfg.n_experts % lay.ep == 0 and dp % lay.ep == 0)
    return all(w % lay.tp == 0 for w in widths) and experts_ok and lay.pp <= cfg.n_layers


def local_shape(name: str, shape: tuple[int, ...], tp: int, ep: int) -> tuple[int, ...]:
    parts = name.split(".")
    module, leaf = parts[-2], parts[-1]
    if module == "experts":                               # [E, f, d] for gate/up, [E, d, f] for down
        E, a, b = shape
        return (E // ep, a // tp, b) if leaf in ("gate", "up") else (E // ep, a, b // tp)
    if module in COLUMN:
        return (shape[0] // tp,) + shape[1:]
    if module in ROW and leaf == "weight":
        return (shape[0], shape[1] // tp)
    return shape


def chunk_rows(rows: int, parts: int, index: int) -> int:
    size = -(-rows // parts)
    return max(0, min(size, rows - index * size))


def held_tensors(cfg: ModelConfig, lay: Layout, stage: int) -> list[tuple[str, tuple[int, ...]]]:
    L = cfg.n_layers
    first, last = stage * L // lay.pp, (stage + 1) * L // lay.pp
    with torch.device("meta"):
        params = list(DecoderLM(cfg).named_parameters())
    held = []
    for name, p in params:
        if name.startswith("blocks."):
            keep = first <= int(name.split(".")[1]) < last
        elif name.startswith(("tok_emb", "pos_emb", "emb_norm")):
            keep = stage == 0
        else:
            keep = stage == lay.pp - 1
        if keep:
            held.append((name, tuple(p.shape)))
    if cfg.tie_embeddings and lay.pp > 1 and stage == lay.pp - 1:
        held.append(("head.weight", tuple(dict(params)["tok_emb.weight"].shape)))
    return held


def hand_count(cfg: ModelConfig, lay: Layout, stage: int, rank: int, seq: int, batch: int) -> dict[str, int]:
    dp = lay.gpus // (lay.tp * lay.pp)
    held = held_tensors(cfg, lay, stage)

    def elems(name, shape, sharded):
        loc = local_shape(name, shape, lay.tp, lay.ep)
        if sharded and loc:
            experts = ".experts." in name
            parts = dp // lay.ep if experts else dp
            loc = (chunk_rows(loc[0], parts, rank % parts),) + loc[1:]
        return math.prod(loc)

    out = {"weights": 2 * sum(elems(n, s, lay.zero >= 3) for n, s in held),
           "grads": 2 * sum(elems(n, s, lay.zero >= 2) for n, s in held),
           "optimizer": 12 * sum(elems(n, s, lay.zero >= 1) for n, s in held) + 4 * len(held)}
    blocks = {}
    for n, s in held:
        if n.startswith("blocks."):
            blocks[n.split(".")[1]] = blocks.get(n.split(".")[1], 0) + elems(n, s, False)
    # ZeRO-3's working set: the largest block gathered twice (computing + prefetched) and its gathered gradients
    out["working_set"] = (2 * 2 + 2) * max(blocks.values(), default=0) if lay.zero >= 3 else 0
    return out


def cases():
    for key, cfg in CONFIGS.items():
        for lay in GRID:
            if not layout_problems(cfg, lay):
                yield pytest.param(key, lay, id=f"{key}-g{lay.gpus}-tp{lay.tp}-pp{lay.pp}-z{lay.zero}-ep{lay.ep}"
                                                 f"{'-sp' if lay.sequence_parallel else ''}")


def test_the_planner_accepts_exactly_the_layouts_the_rules_allow():
    for cfg in CONFIGS.values():
        for lay in GRID:
            assert (not layout_problems(cfg, lay)) == accepted(cfg, lay), (cfg.name, lay)
    # the grid really combines them: every parallelism > 1 together, on the MoE config
    assert any(not layout_problems(CONFIGS["moe"], lay) for lay in GRID
               if lay.tp > 1 and lay.pp > 1 and lay.ep > 1 and lay.zero == 3 and lay.gpus // (lay.tp * lay.pp) > 1)


@pytest.mark.parametrize("key, lay", list(cases()))
def test_training_state_per_gpu_is_the_hand_count(key, lay):
    cfg, setup = CONFIGS[key], Setup(seq=8, micro_batch=1)
    dp = lay.gpus // (lay.tp * lay.pp)
    for stage in range(lay.pp):
        for rank in sorted({0, dp - 1}):
            got = gpu_memory(cfg, lay, setup, stage, rank)
            want = hand_count(cfg, lay, stage, rank, 8, 1)
            assert {k: got[k] for k in want} == want, (stage, rank)
            assert got["total"] == sum(got[k] for k in ("weights", "grads", "optimizer", "activations",
                                                       "kv_cache", "working_set"))


@pytest.mark.parametrize("key", list(CONFIGS))
def test_activations_per_stage_follow_one_f_one_b_and_the_tensor_split(key):
    cfg, B, T, m = CONFIGS[key], 2, 8, 3
    act = activation_estimate(cfg, B, T, "bf16", "sdpa", "none")
    norms = block_norm_count(cfg) * norm_saved_bytes(cfg, B * T, cfg.d_model, 2)      # per block, not divided by TP
    for lay in GRID:
        if layout_problems(cfg, lay) or lay.zero or lay.ep > 1:
            continue
        for stage in range(lay.pp):
            layers = range(stage * cfg.n_layers // lay.pp, (stage + 1) * cfg.n_layers // lay.pp)
            blocks = sum(act.per_layer[i] for i in layers)
            if lay.tp > 1:
                kept = 0 if lay.sequence_parallel else len(layers) * norms
                blocks = kept + math.ceil((blocks - kept) / lay.tp)
            edges = (act.embedding if stage == 0 else 0) + (act.head if stage == lay.pp - 1 else 0)
            want = min(lay.pp - stage, m) * (blocks + edges)
            got = gpu_memory(cfg, lay, Setup(micro_batch=B, seq=T, micro_batches=m), stage)["activations"]
            assert got == want, (lay, stage)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_inference_kv_cache_per_stage_and_tensor_rank(key):
    cfg, B, T = CONFIGS[key], 3, 20
    for lay in GRID:
        if layout_problems(cfg, lay) or lay.zero:
            continue
        for stage in range(lay.pp):
            layers = (stage + 1) * cfg.n_layers // lay.pp - stage * cfg.n_layers // lay.pp
            want = layers * 2 * B * T * (cfg.kv_heads // lay.tp) * cfg.head_width * 2      # bf16 K and V
            assert gpu_memory(cfg, lay, Setup(mode="infer", micro_batch=B, seq=T), stage)["kv_cache"] == want


@pytest.mark.parametrize("key", list(CONFIGS))
def test_int8_weights_per_gpu_count_the_scales_of_the_rows_each_gpu_holds(key):
    cfg = CONFIGS[key]
    for lay in GRID:
        if layout_problems(cfg, lay) or lay.zero:
            continue
        for stage in range(lay.pp):
            want = 0
            for name, shape in held_tensors(cfg, lay, stage):
                loc = local_shape(name, shape, lay.tp, lay.ep)
                module, leaf = name.split(".")[-2:]
                if (module in COLUMN + ROW and leaf == "weight") or module == "experts":
                    want += math.prod(loc) + 2 * math.prod(loc[:-1])      # int8 values + fp16 row scales
                else:
                    want += 2 * math.prod(loc)                             # bf16: norms, biases, router, embeddings
            got = gpu_memory(cfg, lay, Setup(mode="infer", seq=1, quant="int8"), stage)["weights"]
            assert got == want, (lay, stage)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_lora_adapters_per_gpu_are_the_hand_count(key):
    """LoRA on every matrix: A (r x in) and B (out x r) beside each frozen weight, trained alone. Under TP a
    column-split matrix's adapter keeps A whole and splits B's rows; a row-split one's splits A's columns and keeps
    B whole (so the product has the matrix's own split)."""
    cfg, r = CONFIGS[key], 4
    setup = Setup(seq=8, finetune="lora", lora_rank=r, lora_targets=("q", "k", "v", "o", "gate", "up", "down"))
    for lay in GRID:
        if layout_problems(cfg, lay):
            continue
        dp = lay.gpus // (lay.tp * lay.pp)
        for stage in range(lay.pp):
            base, adapters = held_tensors(cfg, lay, stage), []
            for name, (rows, cols) in ((n, s) for n, s in base if n.endswith(".weight") and len(s) == 2):
                module = name.split(".")[-2]
                if module in COLUMN:
                    adapters += [(r, cols), (rows // lay.tp, r)]
                elif module in ROW:
                    adapters += [(r, cols // lay.tp), (rows, r)]

            def adapter_elems(sharded: bool) -> int:
                return sum((chunk_rows(a, dp, 0) if sharded else a) * b for a, b in adapters)

            frozen = sum(math.prod(
                (chunk_rows(loc[0], dp // lay.ep if ".experts." in n else dp, 0),) + loc[1:] if lay.zero >= 3 else loc)
                for n, s in base for loc in [local_shape(n, s, lay.tp, lay.ep)])
            want = {"weights": 2 * (frozen + adapter_elems(lay.zero >= 3)),
                    "grads": 2 * adapter_elems(lay.zero >= 2),
                    "optimizer": 12 * adapter_elems(lay.zero >= 1) + 4 * len(adapters)}
            got = gpu_memory(cfg, lay, setup, stage)
            assert {k: got[k] for k in want} == want, (lay, stage)


def test_lora_settings_accept_rank_1_and_name_what_is_wrong():
    """Rank 1 is a valid adapter (the smallest: one column per side); 0, a float and an unknown target are not."""
    from engine.plan.finetune import target_problems
    assert target_problems(("q", "v"), 1) == []
    assert target_problems(("q",), 0) == ["lora_rank: 0 is not an integer >= 1"]
    assert target_problems(("q",), 2.0) == ["lora_rank: 2.0 is not an integer >= 1"]
    assert target_problems(("qkv",), 8)[0].startswith("lora_targets: qkv not among q, k, v")


def test_several_unknown_lora_targets_are_listed_in_one_readable_message():
    """Two unknown targets read as a comma list, in the order given, before the list of valid ones."""
    from engine.plan.finetune import target_problems
    assert target_problems(("qkv", "q", "mlp"), 8) == \
        ["lora_targets: qkv, mlp not among q, k, v, o, gate, up, down"]


# layers with a mixer only, an FFN only, both, a mixer only: 1, 1, 2 and 1 norms of width d_model
MIXED = ModelConfig(name="mixed", bias=False, tie_embeddings=False, position="rope",
                    layer_types=("full", "none", "full", "full"), ffn_types=("none", "dense", "dense", "none"), **BASE)


@pytest.mark.parametrize("lay", [Layout(2, 2), Layout(4, 2, 2), Layout(2, 2, sequence_parallel=True)],
                         ids=["tp2", "tp2-pp2", "tp2-sp"])
def test_tensor_parallel_activations_keep_each_layer_s_own_norms_whole(lay):
    """TP splits everything a block saves but its norms' inputs (without sequence parallelism), so a layer
    that skips its mixer or its FFN also skips that norm: the replicated share is counted layer by layer from
    the norms the built model has, not as if every layer had the full block's."""
    B, T, m = 2, 8, 3
    act = activation_estimate(MIXED, B, T, "bf16", "sdpa", "none")
    blocks = DecoderLM(MIXED).blocks
    norm = norm_saved_bytes(MIXED, B * T, MIXED.d_model, 2)
    for stage in range(lay.pp):
        layers = range(stage * 4 // lay.pp, (stage + 1) * 4 // lay.pp)
        whole = sum(act.per_layer[i] for i in layers)
        kept = 0 if lay.sequence_parallel else norm * sum(
            sum(name.startswith("norm") for name, _ in blocks[i].named_children()) for i in layers)
        edges = (act.embedding if stage == 0 else 0) + (act.head if stage == lay.pp - 1 else 0)
        want = min(lay.pp - stage, m) * (kept + math.ceil((whole - kept) / lay.tp) + edges)
        assert gpu_memory(MIXED, lay, Setup(micro_batch=B, seq=T, micro_batches=m), stage)["activations"] == want
