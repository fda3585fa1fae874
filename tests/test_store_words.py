"""The run store's texts word for word (refusals, the interrupted note, the running refusal) and its values
read back exactly (non-finite numbers as empty, expert loads as JSON, deletes), without training anything."""
from __future__ import annotations

import math
import os
import sqlite3

import pytest

from engine.config import ModelConfig
from engine.train.loop import RunResult, StepRecord, TrainConfig
from engine.train.store import RunningError, RunStore, StoreError

TINY = ModelConfig(name="tiny", d_model=32, n_layers=1, n_heads=2, ffn_multiple_of=8, vocab_size=27,
                   context_length=16)
ASIDE = "move it aside (`python -m engine runs --move-aside`, or the button on the Training page)"


def test_a_folder_where_the_store_should_be_is_named(tmp_path):
    with pytest.raises(StoreError) as e:
        RunStore(tmp_path)
    assert str(e.value) == f"run store {tmp_path} is a folder, not a file: rename it or set EXPLORER_HOME"


def test_a_store_under_a_file_cannot_create_its_folder(tmp_path):
    (tmp_path / "f").write_text("x")
    p = tmp_path / "f" / "runs.sqlite"
    with pytest.raises(StoreError) as e:
        RunStore(p)
    assert str(e.value) == (f"run store {p}: cannot create its folder (File exists); set EXPLORER_HOME to a "
                            f"writable folder")     # mkdir's strerror: "f" is a file, not a folder


def test_a_runs_table_that_is_not_ours_is_refused_and_left_alone(tmp_path):
    p = tmp_path / "runs.sqlite"
    with sqlite3.connect(p) as db:
        db.execute("CREATE TABLE runs (x INTEGER)")
    with pytest.raises(StoreError) as e:
        RunStore(p)
    assert str(e.value) == f"run store {p} has a `runs` table that is not ours; {ASIDE}"


def test_a_killed_run_reads_interrupted_word_for_word_and_a_live_one_cannot_be_deleted(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    rid = store.create_run(TINY, TrainConfig(), "names", 123, "cpu", 2, initial_loss=3.25)
    with pytest.raises(RunningError) as e:
        store.delete_run(rid)
    assert str(e.value) == f"run {rid} is still being trained (process {os.getpid()}); stop it first, or wait until it ends"
    for step in (1, 2):
        store.add_step(rid, StepRecord(step, 3.0, 1e-3, 0.5, 1000.0, 2.0, 3.5))
    with sqlite3.connect(store.path) as db:                  # as if a process that has exited had written it
        db.execute("UPDATE runs SET pid=? WHERE id=?", (2 ** 22 + 12345, rid))
    run = store.get_run(rid)
    assert (run["status"], run["message"]) == (
        "interrupted", "the process running it ended after 2 stored steps; the curve so far is kept")
    assert (run["world"], run["params"], run["initial_loss"], run["final_loss"], run["samples"]) == (
        2, 123, 3.25, None, [])
    assert store.delete_run(rid) is True and store.delete_run(rid) is False and store.list_runs() == []
    with pytest.raises(KeyError) as e:
        store.get_run(rid)
    assert e.value.args[0] == f"run {rid} does not exist"


def test_non_finite_numbers_read_back_empty_and_expert_loads_as_stored(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    rid = store.create_run(TINY, TrainConfig(steps=2), "names", 10, "cpu", initial_loss=math.nan)
    store.add_step(rid, StepRecord(1, math.inf, 1e-3, math.nan, 5.0, 2.0, 3.5, val_loss=-math.inf,
                                   aux_loss=0.25, router_z_loss=0.5, expert_load=[[3, 1], [0, 4]]))
    store.add_step(rid, StepRecord(2, 1.5, 2e-3, 0.5, 6.0, 2.5, 3.0))
    store.finish_run(RunResult("stopped", "why", [], TINY, 10, initial_loss=math.nan, final_loss=1.25,
                               tokens_per_s=math.inf, tokens_per_s_spread=math.nan, samples=["ab", ""], run_id=rid))
    run = store.get_run(rid)
    assert run["steps"] == [
        {"step": 1, "train_loss": None, "val_loss": None, "lr": 1e-3, "grad_norm": None, "tokens_per_s": 5.0,
         "max_logit": 2.0, "log_z": 3.5, "aux_loss": 0.25, "router_z_loss": 0.5, "expert_load": [[3, 1], [0, 4]]},
        {"step": 2, "train_loss": 1.5, "val_loss": None, "lr": 2e-3, "grad_norm": 0.5, "tokens_per_s": 6.0,
         "max_logit": 2.5, "log_z": 3.0, "aux_loss": None, "router_z_loss": None, "expert_load": None}]
    assert run["train_config"] == {**TrainConfig(steps=2).__dict__} and run["model_config"] == TINY
    assert {k: run[k] for k in ("status", "message", "initial_loss", "final_loss", "tokens_per_s",
                                "tokens_per_s_spread", "samples")} == {
        "status": "stopped", "message": "why", "initial_loss": None, "final_loss": 1.25, "tokens_per_s": None,
        "tokens_per_s_spread": None, "samples": ["ab", ""]}
    assert (run["world"], run["device"], run["data"], run["name"]) == (1, "cpu", "names", "tiny")
    assert store.export_csv(rid) == ("step,train_loss,val_loss,lr,grad_norm,tokens_per_s,max_logit,log_z,aux_loss,"
                                     "router_z_loss\n1,,,0.001,,5.0,2.0,3.5,0.25,0.5\n2,1.5,,0.002,0.5,6.0,2.5,3.0,,\n")
    with sqlite3.connect(store.path) as db:                  # JSON null, not the text 'null', for a dense step
        assert db.execute("SELECT expert_load FROM steps WHERE step=2").fetchone() == (None,)
