"""Run state round-trips through the store: every status a run can end in, the learning rates each step
recorded against the schedule's formula, and non-finite metrics read back as missing."""
from __future__ import annotations

import math
import subprocess
import sys
import threading

import pytest

from engine.config import ModelConfig
from engine.train.data import load_names
from engine.train.loop import RunResult, StepRecord, TrainConfig, train
from engine.train.store import STEP_COLUMNS, RunStore

TINY = ModelConfig(name="tiny", d_model=16, n_layers=1, n_heads=2, ffn_multiple_of=8)
FAST = TrainConfig(steps=6, batch=4, seq=8, eval_every=3, eval_batches=1, samples=1, warmup=2)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path / "home"))
    return RunStore()


def _read(store: RunStore, run_id: int) -> dict:
    return RunStore(store.path).get_run(run_id)        # a fresh handle: what another process would read


def test_finished_run_reads_back_finished_with_every_step(store):
    r = train(TINY, FAST, load_names(), device="cpu", store=store)
    run = _read(store, r.run_id)
    assert r.status == run["status"] == "finished" and run["message"] == r.message
    assert [s["step"] for s in run["steps"]] == [1, 2, 3, 4, 5, 6]
    assert [s["train_loss"] for s in run["steps"]] == [rec.train_loss for rec in r.records]
    assert run["final_loss"] == r.final_loss and run["initial_loss"] == r.initial_loss


def test_stopped_run_reads_back_stopped_with_the_steps_before_the_stop(store):
    stop = threading.Event()

    def on_step(rec):
        if rec.step == 2:
            stop.set()

    r = train(TINY, FAST, load_names(), device="cpu", store=store, stop=stop, on_step=on_step)
    run = _read(store, r.run_id)
    assert r.status == run["status"] == "stopped"
    assert run["message"] == "stopped by the user after 2 steps"
    assert [s["step"] for s in run["steps"]] == [1, 2]


def test_diverged_run_reads_back_diverged_with_no_final_loss(store):
    r = train(TINY, FAST.replace(lr=1e4, warmup=0, grad_clip=0), load_names(), device="cpu", store=store)
    run = _read(store, r.run_id)
    assert r.status == run["status"] == "diverged"
    assert run["message"] == r.message and run["message"].startswith("diverged at step ")
    step = int(run["message"].split()[3].rstrip(":"))
    assert [s["step"] for s in run["steps"]] == list(range(1, step))   # the curve up to the step before
    assert run["final_loss"] is None


@pytest.mark.process
def test_run_whose_process_died_reads_back_interrupted(store):
    # another process creates a run, stores two steps and exits without finishing it
    code = ("from engine.config import ModelConfig; from engine.train.loop import StepRecord, TrainConfig;"
            "from engine.train.store import RunStore; import sys;"
            "s = RunStore(sys.argv[1]); i = s.create_run(ModelConfig(name='gone', d_model=16, n_layers=1,"
            " n_heads=2), TrainConfig(), 'names', 1, 'cpu');"
            "[s.add_step(i, StepRecord(k, 3.0, 1e-3, 1.0, 10.0, 2.0, 1.0)) for k in (1, 2)]; print(i)")
    out = subprocess.run([sys.executable, "-c", code, str(store.path)], capture_output=True, text=True,
                         check=True, cwd=".")
    run = _read(store, int(out.stdout))
    assert run["status"] == "interrupted" and "after 2 stored steps" in run["message"]
    assert [s["step"] for s in run["steps"]] == [1, 2]


@pytest.mark.parametrize("status", ["finished", "stopped", "diverged", "failed"])
def test_every_final_status_is_written_as_given(store, status):
    run_id = store.create_run(TINY, FAST, "names", 123, "cpu")
    store.finish_run(RunResult(status, f"a {status} run", [], TINY, 123, initial_loss=3.5,
                               final_loss=math.nan, tokens_per_s=math.inf, samples=["ab"], run_id=run_id))
    run = _read(store, run_id)
    assert (run["status"], run["message"], run["initial_loss"], run["samples"]) == \
        (status, f"a {status} run", 3.5, ["ab"])
    assert run["final_loss"] is None and run["tokens_per_s"] is None      # non-finite: missing, not NaN


def _schedule(step: int, tc: TrainConfig) -> float:
    """Linear warmup to lr over `warmup` steps, then cosine from lr towards lr * min_lr_ratio.
    The cosine's progress is (step - 1 - warmup) / (steps - warmup), so it reaches the floor one step after the
    last one (the convention test_train_loop pins: lr_at(steps) is the floor)."""
    if step <= tc.warmup:
        return tc.lr * step / tc.warmup
    t = (step - 1 - tc.warmup) / (tc.steps - tc.warmup)
    return tc.lr * (tc.min_lr_ratio + (1 - tc.min_lr_ratio) * (1 + math.cos(math.pi * t)) / 2)


def test_recorded_learning_rates_equal_the_schedule(store):
    tc = FAST.replace(steps=8, warmup=3, lr=2e-3, min_lr_ratio=0.25)
    r = train(TINY, tc, load_names(), device="cpu", store=store)
    lrs = [s["lr"] for s in _read(store, r.run_id)["steps"]]
    assert lrs == pytest.approx([_schedule(k, tc) for k in range(1, 9)], rel=1e-12)   # float cos only
    assert lrs[:4] == [2e-3 / 3, 2 * 2e-3 / 3, 2e-3, 2e-3]                          # warmup, then the peak
    assert lrs[-1] == pytest.approx(2e-3 * (0.25 + 0.75 * (1 + math.cos(math.pi * 4 / 5)) / 2), rel=1e-12)


def test_non_finite_step_metrics_read_back_as_missing(store):
    run_id = store.create_run(TINY, FAST, "names", 1, "cpu")
    store.add_step(run_id, StepRecord(1, math.nan, 1e-3, math.inf, -math.inf, 2.0, math.nan, val_loss=math.inf))
    (step,) = _read(store, run_id)["steps"]
    assert step == {c: None for c in step} | {"step": 1, "lr": 1e-3, "max_logit": 2.0}
    assert set(STEP_COLUMNS) <= set(step)
    header, row = store.export_csv(run_id).splitlines()
    assert dict(zip(header.split(","), row.split(","))) == {c: "" for c in header.split(",")} | \
        {"step": "1", "lr": "0.001", "max_logit": "2.0"}
