"""Distributed training code run in this process. Outside torchrun everything is the single-process no-op.
FSDP2 and tensor parallelism: torch's fake process group (no communication; each collective
returns a tensor of the right shape) lets this process act as rank r of 2, so the layout code runs in-process.
Each rank's parameter, gradient and AdamW-state bytes after one step == the planner's ZeRO-3 / TP figures
(the same reference tests/test_sharding.py checks under torchrun with real gloo ranks)."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.tensor import DTensor, Shard
from torch.testing._internal.distributed.fake_pg import FakeStore

from engine.config import ModelConfig
from engine.model import build_model
from engine.plan import Layout, Setup
from engine.plan.memory import gpu_memory
from engine.train.ddp import SINGLE, DistInfo, env_world, session, wrap
from engine.train.loop import TrainConfig, _optimizer
from engine.train.sharding import clip_grad_norm, full, parallelize, rank_bytes

# 8 query heads over tp=2: 4 per rank (not tp, so "n_heads = tp" would be caught); 2 kv heads: 1 per rank
TP_CFG = dict(name="tp", vocab_size=37, context_length=16, d_model=32, n_layers=2, n_heads=8, n_kv_heads=2,
              d_ff=40, position="rope", bias=True, tie_embeddings=False)
# odd sizes: the 37-row vocabulary, d_ff=35 and the 30 rows of 5 query heads split unevenly under FSDP2
FSDP_CFG = dict(name="odd", vocab_size=37, context_length=16, d_model=30, n_layers=2, n_heads=5, n_kv_heads=1,
                ffn="swiglu", d_ff=35, norm="rmsnorm", norm_bias=False, position="rope", bias=True)


@pytest.fixture
def fake_rank(request):
    """Join a fake 2-rank process group as rank `request.param`; torn down after the test."""
    dist.init_process_group("fake", store=FakeStore(), rank=request.param, world_size=2)
    try:
        yield DistInfo(request.param, 2, 0)
    finally:
        dist.destroy_process_group()


def _one_step(cfg: ModelConfig, info: DistInfo, mode: str):
    model = build_model(cfg, seed=0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert parallelize(model, info, mode) is model      # sharded in place, no wrapper
    assert [str(w.message) for w in seen] == []             # e.g. a plan key naming a module the block lacks
    opt = _optimizer(model, TrainConfig())
    x = torch.randint(cfg.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
    F.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
    clip_grad_norm(list(model.parameters()), 1.0)
    opt.step()
    return model, opt


@pytest.mark.parametrize("fake_rank", [0, 1], indirect=True)
@pytest.mark.parametrize("ffn", ["gelu", "swiglu"])
def test_tensor_parallel_rank_bytes_equal_planner(fake_rank, ffn):
    cfg = ModelConfig(**{**TP_CFG, "ffn": ffn})
    model, opt = _one_step(cfg, fake_rank, "tp")
    planned = gpu_memory(cfg, Layout(2, tp=2), Setup(policy="fp32", seq=8))
    assert rank_bytes(model, opt) == {k: planned[k] for k in ("weights", "grads", "optimizer")}
    block = model.blocks[0]
    assert (block.attn.n_heads, block.attn.kv_heads) == (4, 1)
    # Megatron layout: q, k, v, up (and gate) split by output rows, o and down by input columns
    cols = ["attn.q_proj", "attn.k_proj", "attn.v_proj", "ffn.up"] + (["ffn.gate"] if ffn == "swiglu" else [])
    placements = {n: p.placements for n, p in block.named_parameters() if isinstance(p, DTensor)}
    assert {n: pl for n, pl in placements.items() if n.endswith("weight")} == \
        {**{f"{m}.weight": (Shard(0),) for m in cols}, "attn.o_proj.weight": (Shard(1),),
         "ffn.down.weight": (Shard(1),)}


@pytest.mark.parametrize("fake_rank", [0, 1], indirect=True)
@pytest.mark.parametrize("gate", ["elementwise", "head"])
def test_tensor_parallel_splits_the_output_gate_with_the_query_heads(fake_rank, gate):
    """Qwen3-Next's gate on the attention output: one per output dimension or per head, split as q is (a gate
    left whole met half the heads' output and crashed), and each rank's bytes are the planner's."""
    cfg = ModelConfig(**{**TP_CFG, "attn_gate": gate})
    model, opt = _one_step(cfg, fake_rank, "tp")
    assert rank_bytes(model, opt) == {k: v for k, v in gpu_memory(cfg, Layout(2, tp=2), Setup(policy="fp32", seq=8))
                                      .items() if k in ("weights", "grads", "optimizer")}
    g = model.blocks[0].attn.g_proj.weight
    assert g.placements == (Shard(0),) and g.to_local().shape[0] == (16 if gate == "elementwise" else 4)


@pytest.mark.parametrize("fake_rank", [0, 1], indirect=True)
def test_fsdp_rank_bytes_equal_planner(fake_rank):
    cfg = ModelConfig(**FSDP_CFG)
    model, opt = _one_step(cfg, fake_rank, "fsdp")
    planned = gpu_memory(cfg, Layout(2, zero=3), Setup(policy="fp32", seq=8), dp_rank=fake_rank.rank)
    assert rank_bytes(model, opt) == {k: planned[k] for k in ("weights", "grads", "optimizer")}


@pytest.mark.parametrize("fake_rank", [0], indirect=True)
def test_full_gathers_a_shard_and_passes_whole_tensors(fake_rank):
    cfg = ModelConfig(**{**TP_CFG, "ffn": "gelu"})
    model = parallelize(build_model(cfg, seed=0), fake_rank, "tp")
    shard, whole = model.blocks[0].attn.q_proj.weight, model.blocks[0].norm1.weight
    assert shard.to_local().shape == (16, 32)
    gathered = full(shard)
    assert type(gathered) is torch.Tensor and gathered.shape == (32, 32)     # the whole q weight, no DTensor
    assert full(whole) is whole


def test_outside_torchrun_the_world_is_one_process(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert env_world() == 1
    with session("cpu") as info:
        assert info is SINGLE and (info.rank, info.world, info.main) == (0, 1, True)
        assert not dist.is_initialized()
    monkeypatch.setenv("WORLD_SIZE", "3")                       # what torchrun --nproc_per_node=3 sets
    assert env_world() == 3


@pytest.mark.parametrize("fake_rank", [1], indirect=True)
def test_wrap_puts_a_cpu_model_under_ddp_without_device_ids(fake_rank):
    """Data parallel on CPU (gloo): DistributedDataParallel around the same module, with no device ids (torch
    refuses any for a CPU module); one process is left unwrapped."""
    from torch.nn.parallel import DistributedDataParallel
    model = build_model(ModelConfig(**{**TP_CFG, "ffn": "gelu"}), seed=0)
    assert wrap(model, SINGLE) is model
    ddp = wrap(model, fake_rank)
    assert isinstance(ddp, DistributedDataParallel) and ddp.module is model and ddp.device_ids is None


@pytest.mark.parametrize("fake_rank", [0, 1], indirect=True)
def test_mean_divides_the_all_reduced_sum_by_the_world(fake_rank):
    """The logged loss is the mean over ranks: all_reduce(SUM) / world, in place. The fake group's all_reduce
    returns each rank's own tensor, so the mean of 6 on 2 ranks reads 3 here (6 + 6 on real ranks gives 6)."""
    t = torch.tensor([6.0, -2.0])
    assert fake_rank.mean(t) is t and t.tolist() == [3.0, -1.0]
    one = torch.tensor([6.0])
    assert SINGLE.mean(one).tolist() == [6.0]


def test_ddp_pins_a_gpu_rank_to_its_own_device(monkeypatch):
    """DistributedDataParallel must be told which GPU a rank's replica lives on (device_ids=[its index]: without it
    every rank's buckets go to the current device, cuda:0 in a fresh process). DDP is replaced by a recorder, so
    the CUDA branch runs on a machine without one (the CPU branch: the test above, with a real DDP)."""
    import torch.nn.parallel

    made = []
    monkeypatch.setattr(torch.nn.parallel, "DistributedDataParallel",
                        lambda model, device_ids: made.append(device_ids) or model)

    class OnGPU3(torch.nn.Module):     # a replica whose parameters live on cuda:3 (only .device is read)
        def parameters(self, recurse=True):
            yield type("Param", (), {"device": torch.device("cuda", 3)})

    wrap(OnGPU3(), DistInfo(rank=3, world=4, local_rank=3))
    assert made == [[3]]


def test_max_all_reduces_the_tensor_it_is_given_with_max(monkeypatch):
    """The logged max logit is all_reduce(MAX) of this rank's tensor, in place, over the group; one process
    returns it without a collective."""
    import engine.train.ddp as ddp
    calls = []
    monkeypatch.setattr(ddp.dist, "all_reduce", lambda t, op: calls.append((t, op)))
    t = torch.tensor(4.5)
    assert DistInfo(rank=1, world=2).max(t) is t and calls == [(t, dist.ReduceOp.MAX)]
    assert SINGLE.max(t) is t and len(calls) == 1


@pytest.mark.parametrize("change, why", [
    ({"layer_types": None}, "this model has recurrent, mixer-only or FFN-only layers"),   # the hybrid case itself
    ({"attn_sinks": True}, "attn_sinks keeps one logit per head on every rank"),
    ({"qk_norm": True, "qk_norm_scope": "all_heads"}, "qk_norm_scope all_heads normalizes over every head at once"),
    ({"kv_lora_rank": 8, "q_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 4, "n_kv_heads": None},
     "MLA's latent projections (kv_lora_rank) are shared by every head")])
def test_tp_refuses_what_it_cannot_split_and_says_what_trains_it(change, why):
    """Tensor parallelism splits attention heads and FFN columns; a layer that needs every head in one place is
    refused before any process group is needed, naming the field and the modes that do train it (each of these
    crashed in the forward before: a sink or norm of every head met half of them)."""
    if change == {"layer_types": None}:
        from tests.hybrid_cases import hybrid_configs
        cfg = next(c for c in hybrid_configs().values() if c.hybrid)
    else:
        cfg = ModelConfig(**{**TP_CFG, **change})
    with pytest.raises(ValueError) as e:
        parallelize(build_model(cfg, seed=0), DistInfo(0, 2, 0), "tp")
    assert str(e.value) == f"parallel: tp splits attention heads and FFN columns only; {why} (use ddp or fsdp)"


@pytest.mark.parametrize("mode", ["ddp", "fsdp", "tp"])
def test_one_process_trains_the_whole_model_in_every_mode(mode):
    """A single-process run with parallel fsdp or tp (the Training page's default world of one): the model is
    trained as it is, every parameter a whole plain tensor, with no process group needed."""
    model = build_model(ModelConfig(**TP_CFG), seed=0)
    assert parallelize(model, SINGLE, mode) is model
    assert not any(isinstance(p, DTensor) for p in model.parameters())
    assert [tuple(p.shape) for p in model.parameters()] == \
           [tuple(p.shape) for p in build_model(ModelConfig(**TP_CFG), seed=0).parameters()]


@pytest.mark.parametrize("fake_rank", [1], indirect=True)
def test_parallelize_wraps_ddp_around_the_whole_model(fake_rank):
    """parallel: ddp under torchrun (the default mode): every rank holds the whole model inside a
    DistributedDataParallel wrapper, nothing sharded."""
    from torch.nn.parallel import DistributedDataParallel
    model = build_model(ModelConfig(**TP_CFG), seed=0)
    net = parallelize(model, fake_rank, "ddp")
    assert isinstance(net, DistributedDataParallel) and net.module is model
    assert not any(isinstance(p, DTensor) for p in model.parameters())


def _train_as_rank_1_of_2(mode: str, tmp_path):
    from engine.train.loop import train
    text = tmp_path / "abc.txt"
    text.write_text("abcab cab bca " * 40)
    tc = TrainConfig(steps=2, batch=2, seq=8, eval_every=1, eval_batches=1, samples=2, data=str(text),
                     parallel=mode, warmup=0)
    return train(ModelConfig(**{**TP_CFG, "n_layers": 1}), tc, device="cpu", info=DistInfo(1, 2, 0))


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_only_the_ranks_that_must_take_part_generate_the_samples(mode, tmp_path):
    """Rank 1 of 2 training from a text file named in TrainConfig.data: under ddp it holds the whole model,
    so rank 0 alone writes the samples and rank 1 spends no time on them; under fsdp every rank takes part in
    each sampling forward (the shards are gathered), so rank 1 samples too. Either way the run reads the file
    it was given (the data the user chose), not the default names. (DDP's gradient hook needs a real group:
    a one-process gloo group stands in for rank 1's; fsdp runs on the fake group.)"""
    if mode == "ddp":
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    else:
        dist.init_process_group("fake", store=FakeStore(), rank=1, world_size=2)
    try:
        r = _train_as_rank_1_of_2(mode, tmp_path)
    finally:
        dist.destroy_process_group()
    assert r.status == "finished" and r.model_config.vocab_size == 5   # BOS + a, b, c and the space of abc.txt
    assert len(r.samples) == (0 if mode == "ddp" else 2)
