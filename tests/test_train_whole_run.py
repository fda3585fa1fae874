"""A whole training run read back field by field: every StepRecord (lr by hand, tokens/s by a stepped clock,
val loss at each evaluation), the RunResult, the stored run, its CSV and the texts the user reads."""
from __future__ import annotations

import math
import re
import threading
from dataclasses import asdict
from types import SimpleNamespace

import pytest

import engine.train.loop as loop
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.train.data import load_names
from engine.train.loop import TrainConfig, sample, train
from engine.train.store import RunStore

TINY = ModelConfig(name="tiny", d_model=32, n_layers=1, n_heads=2, ffn_multiple_of=8, vocab_size=2,
                   context_length=2)
TC = TrainConfig(steps=4, batch=8, seq=8, lr=0.01, min_lr_ratio=0.1, warmup=2, eval_every=2, eval_batches=1,
                 samples=2, seed=1)


@pytest.fixture(scope="module")
def names():
    return load_names()


@pytest.fixture(scope="module")
def run(names, tmp_path_factory):
    """TC trained with every step taking 0.5 s on a stepped clock, stored; (result, store, the final model)."""
    clock = iter(range(10**6))
    built = []
    real = loop.build_model
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loop, "time", SimpleNamespace(perf_counter=lambda: next(clock) * 0.5))
        mp.setattr(loop, "build_model", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
        store = RunStore(tmp_path_factory.mktemp("store") / "runs.sqlite")
        r = train(TINY, TC, names, device="cpu", store=store)
    return r, store, built[0]


def test_every_step_record_holds_its_lr_throughput_and_evaluations(run):
    r, _, _ = run
    # warmup 2 steps (0.005, 0.01), then the cosine over 2 steps: 0.01 at its start, 0.01 x (0.1 + 0.9 x 0.5)
    assert [rec.lr for rec in r.records] == pytest.approx([0.005, 0.01, 0.01, 0.0055], rel=1e-12)
    assert [rec.step for rec in r.records] == [1, 2, 3, 4]
    assert [rec.tokens_per_s for rec in r.records] == [8 * 8 / 0.5] * 4          # 128 tokens/s
    assert [rec.val_loss is not None for rec in r.records] == [False, True, False, True]
    for rec in r.records:
        assert math.isfinite(rec.train_loss) and rec.grad_norm > 0 and rec.log_z > rec.max_logit > 0
        assert (rec.aux_loss, rec.router_z_loss, rec.expert_load) == (None, None, None)   # a dense model


def test_the_optimizer_steps_with_the_scheduled_lr_not_the_peak(names, monkeypatch):
    """The warmup and the cosine reach the weights: every parameter group of the AdamW that takes step n holds
    the schedule's lr for it (by hand, as above), not tc.lr; the record shows the same number."""
    opts, seen = [], []
    real = loop._optimizer
    monkeypatch.setattr(loop, "_optimizer", lambda *a: opts.append(real(*a)) or opts[-1])
    r = train(TINY, TC.replace(samples=0), names, device="cpu",
              on_step=lambda rec: seen.append([g["lr"] for g in opts[0].param_groups]))
    want = [0.005, 0.01, 0.01, 0.0055]
    assert len(opts[0].param_groups) == 2 and [lrs[0] for lrs in seen] == pytest.approx(want, rel=1e-12)
    assert all(len(set(lrs)) == 1 for lrs in seen) and [rec.lr for rec in r.records] == [lrs[0] for lrs in seen]


def test_the_run_result_is_whole(run):
    r, _, model = run
    assert (r.status, r.tokens_per_s, r.tokens_per_s_spread) == ("finished", 128.0, 0.0)
    assert r.model_config == TINY.replace(vocab_size=27, context_length=8, dropout=0.0)
    assert r.params == count_params(r.model_config).total
    assert r.final_loss == r.records[-1].val_loss
    assert r.message == f"4 steps: val loss {r.initial_loss:.3f} -> {r.final_loss:.3f} at 128 tokens/s (median step)"
    # the samples come from the final model with the run's seed (1), the same names sampling again gives (a run
    # at seed 1 does not show seed 0's draw)
    assert len(r.samples) == 2 and r.samples == sample(model, load_names(), 2, seed=1)
    assert r.samples != sample(model, load_names(), 2, seed=0)


def test_the_stored_run_reads_back_as_trained(run):
    r, store, _ = run
    got = store.get_run(r.run_id)
    steps = got.pop("steps")
    assert [s | {"expert_load": None} for s in steps] == [
        {k: v for k, v in asdict(rec).items()} for rec in r.records]
    want = {"id": r.run_id, "name": "tiny", "data": "names", "status": "finished", "message": r.message,
            "params": r.params, "device": "cpu", "world": 1, "model_config": r.model_config,
            "train_config": asdict(TC), "initial_loss": r.initial_loss, "final_loss": r.final_loss,
            "tokens_per_s": 128.0, "tokens_per_s_spread": 0.0, "samples": r.samples}
    assert {k: got[k] for k in want} == want
    listed = store.list_runs()[0]
    assert listed == {k: got[k] for k in ("id", "created", "name", "data", "status", "message", "params", "device",
                                           "world", "initial_loss", "final_loss", "tokens_per_s",
                                           "tokens_per_s_spread")} | {"steps": 4}


def test_the_csv_has_one_row_per_step_and_the_initial_loss_at_step_0(run):
    r, store, _ = run
    lines = store.export_csv(r.run_id).splitlines()
    assert lines[0] == "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,max_logit,log_z,aux_loss,router_z_loss"
    assert lines[1] == f"0,,{r.initial_loss},,,,,,,"
    for line, rec in zip(lines[2:], r.records, strict=True):
        val = "" if rec.val_loss is None else repr(rec.val_loss)
        assert line == (f"{rec.step},{rec.train_loss!r},{val},{rec.lr!r},{rec.grad_norm!r},{rec.tokens_per_s!r},"
                        f"{rec.max_logit!r},{rec.log_z!r},,")


def test_a_stopped_run_says_after_how_many_steps_word_for_word(names):
    stop = threading.Event()
    r = train(TINY, TC.replace(steps=5, samples=0), names, device="cpu", stop=stop,
              on_step=lambda rec: rec.step == 2 and stop.set())
    assert (r.status, r.message, len(r.records)) == ("stopped", "stopped by the user after 2 steps", 2)
    assert r.records[-1].val_loss == r.final_loss and r.samples == []


def test_a_diverged_run_says_where_and_why_word_for_word(names):
    tc = TC.replace(lr=1e4, warmup=0, steps=30, samples=0)
    r = train(TINY, tc, names, device="cpu")
    m = re.fullmatch(r"diverged at step (\d+): training loss (\S+) (.+) \(grad norm (\S+), lr (\S+)\); the curve "
                     r"up to step (\d+) is kept\. Try a smaller lr, a warmup, clipping or z-loss\.", r.message)
    assert m, r.message
    step, loss, what, gn, lr, kept = m.groups()
    assert int(kept) == int(step) - 1 == len(r.records)
    assert lr == f"{loop.lr_at(int(step) - 1, tc):.3g}"
    if not math.isfinite(float(loss)):
        assert what == "is not finite"
    elif math.isfinite(float(gn)):
        assert what == "rose above 3x the initial loss" and float(loss) > 3 * r.initial_loss
    else:
        assert what == "gradient is not finite"
    assert (r.status, r.final_loss, r.samples) == ("diverged", None, [])


def test_a_non_finite_gradient_is_named(names, monkeypatch):
    """A finite loss with an infinite gradient norm: the message blames the gradient."""
    monkeypatch.setattr(loop.torch.nn.utils, "clip_grad_norm_", lambda *a, **k: loop.torch.tensor(math.inf))
    r = train(TINY, TC.replace(samples=0), names, device="cpu")
    assert r.status == "diverged" and r.records == []
    assert " gradient is not finite (grad norm inf, lr 0.005); the curve up to step 0 is kept." in r.message
    assert r.message.startswith("diverged at step 1: training loss ")


def test_a_non_finite_loss_is_named_word_for_word(names, monkeypatch):
    """An infinite training loss at step 1 (the first step's cross-entropy times inf): the message says the loss
    is not finite, with the step, the grad norm and the warmup's lr 0.01 / 2."""
    real = loop.F.cross_entropy
    monkeypatch.setattr(loop.F, "cross_entropy", lambda *a, **k: real(*a, **k) * math.inf)
    r = train(TINY, TC.replace(samples=0), names, device="cpu")
    assert (r.status, r.records, r.final_loss) == ("diverged", [], None)
    assert r.message == ("diverged at step 1: training loss inf is not finite (grad norm nan, lr 0.005); the curve "
                         "up to step 0 is kept. Try a smaller lr, a warmup, clipping or z-loss.")


def test_names_are_sampled_up_to_24_characters_at_temperature_0_8_with_seed_0(names):
    model = loop.build_model(TINY.replace(vocab_size=27, context_length=8), seed=0)
    got = sample(model, names, 6)
    assert got == sample(model, names, 6, max_new=24, temperature=0.8, seed=0)
    assert got != sample(model, names, 6, max_new=24, temperature=0.8, seed=1)
    assert all(len(s) <= 24 and "\n" not in s for s in got) and max(map(len, got)) > 8   # untrained: long names
