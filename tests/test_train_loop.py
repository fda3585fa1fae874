"""The training loop: schedule, learning on names, divergence, stopping, z-loss, per-step diagnostics."""
from __future__ import annotations

import math
import threading

import pytest
import torch

from engine.budget.params import count_params
from engine.config import ConfigError, ModelConfig
from engine.presets import get_preset
from engine.train.data import load_names
from engine.train.loop import StepRecord, TrainConfig, lr_at, sample, step_throughput, train
from engine.train.small import small_version

TINY = ModelConfig(name="tiny", d_model=32, n_layers=1, n_heads=2, ffn_multiple_of=8, vocab_size=2,
                   context_length=2)
FAST = TrainConfig(steps=30, batch=16, seq=16, eval_every=10, eval_batches=2, samples=4, lr=1e-2)


@pytest.fixture(scope="module")
def names():
    return load_names()


def test_schedule_warms_up_linearly_then_cosines_to_the_floor():
    tc = TrainConfig(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(0, tc) == pytest.approx(0.1) and lr_at(9, tc) == pytest.approx(1.0)
    assert lr_at(10, tc) == pytest.approx(1.0) and lr_at(55, tc) == pytest.approx(0.55)
    assert lr_at(100, tc) == pytest.approx(0.1)
    lrs = [lr_at(s, tc) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))


@pytest.mark.parametrize("steps, warmup", [(100, 10), (11, 10), (2, 1), (1, 0), (3, 0)])
def test_the_cosine_reaches_its_floor_at_step_steps_however_short(steps, warmup):
    """The schedule's promise (the Training page's lr curve ends at lr x min_lr_ratio): one past the last step
    trained sits at the floor, also when the cosine spans a single step after the warmup."""
    tc = TrainConfig(steps=steps, warmup=warmup, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(steps, tc) == pytest.approx(0.1)
    assert lr_at(warmup, tc) == pytest.approx(1.0)


def test_matrices_decay_by_the_runs_weight_decay_and_gains_do_not():
    """AdamW decays every matrix (embeddings included) by the run's weight_decay and no norm gain or bias:
    after one step with zero gradients a matrix is exactly (1 - lr x weight_decay) times itself."""
    from engine.model import build_model
    from engine.train.loop import _optimizer
    tc = FAST.replace(weight_decay=0.3, lr=0.5)
    model = build_model(TINY.replace(vocab_size=27, context_length=16), seed=0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = _optimizer(model, tc)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in model.named_parameters():
        want = before[n] * (1 - 0.5 * 0.3) if p.dim() >= 2 else before[n]
        torch.testing.assert_close(p.detach(), want, rtol=1e-6, atol=0, msg=n)


def test_bad_settings_name_the_field():
    with pytest.raises(ConfigError) as e:
        TrainConfig(steps=0, lr=-1.0, dropout=1.5)
    assert [p.split(":")[0] for p in e.value.problems] == ["steps", "lr", "dropout"]


def test_small_version_keeps_the_architecture():
    for name in ("llama-3-8b", "falcon-7b", "gemma-2-2b", "gpt2"):
        big = get_preset(name).config
        small = small_version(big)
        assert small.d_model == 64 and small.n_layers == 2
        assert (small.norm, small.ffn, small.position, small.block, small.norm_placement) == \
               (big.norm, big.ffn, big.position, big.block, big.norm_placement)
        assert small.attention_kind[:3] == big.attention_kind[:3]       # MHA, GQA or MQA


def test_a_run_learns_and_reports_every_diagnostic(names):
    seen = []
    r = train(TINY, FAST, names, device="cpu", on_step=seen.append)
    assert r.status == "finished" and len(r.records) == len(seen) == 30
    assert r.model_config.vocab_size == 27 and r.model_config.context_length == 16
    assert r.params == count_params(r.model_config).total      # the run's size, as the Training page lists it
    assert r.initial_loss == pytest.approx(math.log(27), rel=0.05)
    assert r.final_loss < 0.9 * r.initial_loss
    assert [s.step for s in seen if s.val_loss is not None] == [10, 20, 30]
    assert r.records[-1].val_loss == r.final_loss
    for rec in r.records:
        assert rec.grad_norm > 0 and rec.tokens_per_s > 0 and rec.max_logit > 0
        assert rec.log_z > rec.max_logit       # log-sum-exp exceeds the largest logit
    assert len(r.samples) == 4 and all(s.isalpha() or s == "" for s in r.samples)


def test_same_seed_same_curve(names):
    a = train(TINY, FAST.replace(steps=5), names, device="cpu")
    b = train(TINY, FAST.replace(steps=5), names, device="cpu")
    assert [x.train_loss for x in a.records] == [x.train_loss for x in b.records]


def test_absurd_lr_diverges_with_a_message_and_keeps_the_curve(names):
    r = train(TINY, FAST.replace(lr=1e4, warmup=0), names, device="cpu")
    assert r.status == "diverged" and r.final_loss is None and r.samples == []
    failed = int(r.message.split("step ")[1].split(":")[0])
    assert len(r.records) == failed - 1 and "smaller lr" in r.message


def test_stop_event_ends_the_run_cleanly(names):
    stop = threading.Event()

    def on_step(rec):
        if rec.step == 3:
            stop.set()

    r = train(TINY, FAST, names, device="cpu", on_step=on_step, stop=stop)
    assert r.status == "stopped" and len(r.records) == 3 and r.final_loss is not None
    assert "after 3 steps" in r.message
    assert r.records[-1].val_loss == r.final_loss   # evaluated after the last step, kept with it (CSV, charts)


def test_a_steps_tokens_per_s_is_its_batch_times_seq_over_its_time(names, monkeypatch):
    """The Training page's tokens/s: batch x seq tokens over the step's seconds (here every step takes 0.25 s by
    a stepped clock: 16 x 16 / 0.25 = 1,024 tokens/s)."""
    from types import SimpleNamespace

    import engine.train.loop as loop
    clock = iter(range(10**6))
    monkeypatch.setattr(loop, "time", SimpleNamespace(perf_counter=lambda: next(clock) * 0.25))   # the loop's clock
    r = train(TINY, FAST.replace(steps=3), names, device="cpu")
    assert [rec.tokens_per_s for rec in r.records] == [1024.0] * 3 and r.tokens_per_s == 1024.0


def _rates(*tokens_per_s: float) -> list[StepRecord]:
    return [StepRecord(i + 1, 1.0, 1e-3, 1.0, t, 1.0, 1.0) for i, t in enumerate(tokens_per_s)]


def test_throughput_is_the_median_step_not_a_mean_the_slow_steps_dominate():
    """Four steps at 30k tokens/s and one at 300 (another process woke up): total tokens over total seconds reads
    5 / (4/30k + 1/300) = 1,442 tokens/s; the median step reads 30,000. Spread: IQR / median with the exclusive
    quartiles of [300, 30k, 30k, 30k, 30k] (positions 1.5 and 4.5): (30,000 - 15,150) / 30,000 = 0.495."""
    median, spread = step_throughput(_rates(30_000, 300, 30_000, 30_000, 30_000))
    assert median == 30_000 and spread == pytest.approx(0.495)
    assert step_throughput(_rates(10, 30, 20, 40)) == (25, pytest.approx((37.5 - 12.5) / 25))
    assert step_throughput([]) == (0.0, 0.0)


def test_a_runs_tokens_per_s_is_the_median_of_its_steps(names):
    r = train(TINY, FAST.replace(steps=7, samples=0), names, device="cpu")
    rates = sorted(rec.tokens_per_s for rec in r.records)
    assert r.tokens_per_s == rates[3] and "(median step)" in r.message
    assert r.tokens_per_s_spread == pytest.approx((rates[5] - rates[1]) / rates[3])   # exclusive quartiles of 7


def test_z_loss_pulls_log_z_towards_zero(names):
    tc = FAST.replace(steps=40, eval_every=40)
    plain = train(TINY, tc, names, device="cpu")
    zl = train(TINY, tc.replace(z_loss=0.1), names, device="cpu")
    assert abs(zl.records[-1].log_z) < 0.5 * abs(plain.records[-1].log_z)


def test_samples_stop_at_the_separator(names):
    r = train(TINY, FAST.replace(steps=1, samples=0), names, device="cpu")
    model_cfg = r.model_config
    from engine.model import build_model
    model = build_model(model_cfg)
    out = sample(model, names, 6, max_new=12, seed=1)
    assert len(out) == 6 and all("\n" not in s and len(s) <= 12 for s in out)
    assert out == sample(model, names, 6, max_new=12, seed=1)
    assert torch.is_grad_enabled()


def test_small_version_keeps_the_first_layers_pattern_and_resamples_longrope():
    """Per-layer and per-frequency lists follow the smaller shape instead of making it invalid."""
    base = get_preset("phi-3.5-mini").config.replace(
        n_layers=4, attn_window=64, layer_types=("sliding", "full", "sliding", "full"), nope_layers=(2, 4))
    small = small_version(base, n_layers=3)
    assert small.layer_types == ("sliding", "full", "sliding")
    assert small.nope_layers == (2,)
    half = small.rotary_dim // 2
    long = base.rope_long_factor
    assert len(small.rope_long_factor) == half
    assert small.rope_long_factor[0] == long[0] and small.rope_long_factor[-1] == long[-1]
    assert all(f in long for f in small.rope_long_factor)
    assert small_version(base, n_layers=2).nope_layers == (2,)          # layer 2 is still one of the two


def test_small_version_pins_the_size_and_drops_the_big_widths():
    big = get_preset("gemma-2-2b").config                                # head_dim 256, ffn_multiple_of 256
    small = small_version(big)
    assert (small.name, small.d_model, small.n_layers, small.n_heads, small.head_dim, small.d_ff) == \
        ("gemma-2-2b-small", 64, 2, 4, None, None)
    assert (small.head_width, small.ffn_multiple_of, small.ffn_width) == (16, 8, 176)   # 8/3 * 64 up to 8s
    assert small.n_kv_heads == 2                                         # GQA-4 becomes GQA-2 at 4 heads
    assert small_version(big, n_heads=2).n_kv_heads is None              # no GQA at 2 heads: MHA
    assert small_version(get_preset("gpt2").config).n_kv_heads is None   # MHA stays MHA (None, not 4)


@pytest.mark.parametrize("first_dense, every, expected", [(None, 1, (None, 1)), (1, 1, (1, 1)), (3, 3, (1, 2))])
def test_small_version_keeps_moe_layers_and_drops_expert_widths(first_dense, every, expected):
    big = get_preset("qwen1.5-moe-a2.7b").config.replace(moe_first_dense=first_dense, moe_every=every)
    small = small_version(big)
    assert (small.moe_first_dense, small.moe_every) == expected          # at least one MoE layer of the two
    assert (small.expert_d_ff, small.shared_d_ff, small.n_experts, small.n_shared_experts) == (None, None, 60, 1)


def test_small_version_resamples_longrope_to_one_and_two_frequencies():
    base = get_preset("phi-3.5-mini").config
    long = base.rope_long_factor
    assert small_version(base, n_heads=32).rope_long_factor == (long[0],)           # head 2: one frequency
    assert small_version(base, n_heads=16).rope_long_factor == (long[0], long[-1])  # head 4: fastest, slowest
    half = base.replace(rope_fraction=0.5, rope_long_factor=long[::2], rope_short_factor=base.rope_short_factor[::2])
    # rotary 16 * 0.5 = 8 wide: 4 frequencies, evenly over the 24 from fastest to slowest
    assert small_version(half).rope_long_factor == tuple(long[::2][i] for i in (0, 8, 15, 23))


@pytest.mark.parametrize("mode, want", [("ddp", (1, 2)), ("fsdp", (1, 2)), ("tp", (0, 1))])
def test_each_rank_reads_its_share_of_the_batch(mode, want):
    """Rank 1 of 2 processes: data parallel (ddp, fsdp) reads its own half of each batch, so the two together
    train on the batch once; tensor-parallel ranks split the weights, so each reads the whole batch."""
    from engine.train.ddp import DistInfo
    from engine.train.sharding import data_slice
    assert data_slice(DistInfo(rank=1, world=2, local_rank=1), mode) == want


def test_an_odd_batch_is_refused_before_data_parallel_ranks_split_it(names):
    """batch 3 over 2 data-parallel processes cannot be halved: the run is refused by the batch field's name."""
    from engine.train.ddp import DistInfo
    with pytest.raises(ConfigError) as e:
        train(TINY, FAST.replace(batch=3), names, device="cpu", info=DistInfo(rank=1, world=2, local_rank=1))
    assert e.value.problems == ["batch: 3 must be divisible by the number of processes (2)"]
