"""Measured sweep columns: latency and val loss per point on a tiny model, runs stored and reloadable, stop,
refusal of a point too big to build, and the CLI's --measure."""
from __future__ import annotations

import json
import threading

import pytest

from engine.cli import main
from engine.config import ConfigError, ModelConfig
from engine.sweep import run_sweep
from engine.measure.rounds import MIN_ROUNDS
from engine.sweep.measured import MeasureSettings, SweepJob, estimate_duration, measure_sweep
from engine.train.store import RunStore

TINY = ModelConfig(name="tiny", vocab_size=64, context_length=32, d_model=16, n_layers=1, n_heads=4,
                   position="rope", norm="rmsnorm", norm_bias=False, bias=False)
QUICK = dict(seq=8, budget_s=0.05, steps=3)


def test_latency_and_loss_per_point_and_runs_in_the_store(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    sweep = run_sweep(TINY, {"n_kv_heads": [1, 3, 4]})
    seen = []
    out = measure_sweep(sweep, MeasureSettings(what=("latency", "loss"), **QUICK), store=store,
                        on_progress=seen.append)
    rows = out.rows()
    assert [r["valid"] for r in rows] == [True, False, True]
    stored = {r["id"]: r for r in store.list_runs()}
    assert len(stored) == 2
    for r in (rows[0], rows[2]):
        assert r["latency_ms"] > 0 and r["latency_iqr_ms"] >= 0
        run = store.get_run(r["run_id"])                                   # reloadable like any run
        assert run["status"] == "finished" and run["final_loss"] == pytest.approx(r["val_loss"])
        assert len(run["steps"]) == 3 and run["name"].startswith("tiny n_kv_heads=")
        assert run["train_config"]["seed"] == 0 and run["train_config"]["steps"] == 3   # same budget per point
    assert rows[1]["latency_ms"] is None and rows[1]["run_id"] is None
    steps = [p for p in seen if p.what.startswith("training")]
    assert len(steps) == 2 * 3 and steps[-1].seconds_left == 0 and steps[-1].fraction == 1.0   # 3 steps x 2 points
    rounds = [p for p in seen if p.what.startswith("latency round")]
    assert len(rounds) >= MIN_ROUNDS and all(0 < p.fraction <= 1 for p in seen)


def test_stop_keeps_the_rows_and_says_what_is_missing(tmp_path):
    stop = threading.Event()
    sweep = run_sweep(TINY, {"n_kv_heads": [1, 2]})
    out = measure_sweep(sweep, MeasureSettings(what=("latency", "loss"), **QUICK),
                        store=RunStore(tmp_path / "r.sqlite"), on_progress=lambda p: stop.set(), stop=stop)
    rows = out.rows()
    assert out.stopped and len(rows) == 2 and rows[0]["total_params"] is not None
    assert rows[0]["latency_ms"] is None and rows[1]["latency_ms"] is None      # stopped while building
    assert all("loss: stopped before this point trained" in r["problems"] for r in rows)
    assert RunStore(tmp_path / "r.sqlite").list_runs() == []


def test_a_point_too_big_is_refused_with_the_numbers(monkeypatch):
    import engine.guard as guard
    monkeypatch.setattr(guard, "free_bytes", lambda device: 1000)
    out = measure_sweep(run_sweep(TINY, {"n_kv_heads": [1]}), MeasureSettings(**QUICK))
    row = out.rows()[0]
    assert row["latency_ms"] is None and row["problems"][0].startswith("latency: refusing to build")


def test_settings_are_checked_and_the_estimate_comes_first():
    with pytest.raises(ConfigError, match="measure: 'speed' is not one of latency, loss"):
        MeasureSettings(what=("speed",))
    with pytest.raises(ConfigError, match="budget_s: 0 is not a number > 0"):
        MeasureSettings(budget_s=0)
    sweep = run_sweep(TINY, {"n_kv_heads": [1, 2, 3]})
    latency = estimate_duration(sweep, MeasureSettings(what=("latency",), **QUICK))
    both = estimate_duration(sweep, MeasureSettings(what=("latency", "loss"), **QUICK))
    assert 0 < latency.low_s <= latency.high_s and both.low_s > latency.low_s
    assert latency.how.startswith("2 points: latency")                       # n_kv_heads=3 is invalid, not timed
    job = SweepJob(sweep, MeasureSettings(what=("loss",), **QUICK))
    assert job.progress is None and not job.running


def test_job_runs_in_the_background(tmp_path):
    job = SweepJob(run_sweep(TINY, {"n_kv_heads": [2]}), MeasureSettings(what=("loss",), **QUICK),
                   store=RunStore(tmp_path / "r.sqlite")).start()
    job.join(60)
    assert not job.running and job.error is None
    assert job.result.rows()[0]["val_loss"] > 0 and job.progress.what == "training n_kv_heads=2: step 3/3"


def test_cli_measure_loss_stores_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))
    yaml_path = tmp_path / "tiny.yaml"
    yaml_path.write_text(TINY.to_yaml())
    rc = main(["sweep", "--config", str(yaml_path), "--knob", "n_kv_heads", "--values", "1,4", "--measure", "loss",
               "--steps", "2", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0 and "measuring loss: about" in err
    rows = json.loads(out)["rows"]
    runs = RunStore().list_runs()
    assert sorted(r["run_id"] for r in rows) == sorted(r["id"] for r in runs)
    assert all(r["val_loss"] == pytest.approx(RunStore().get_run(r["run_id"])["final_loss"]) for r in rows)
