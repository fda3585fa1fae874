"""The SQLite run store: WAL, step-by-step writes, list / reload / delete / CSV, under a tmp EXPLORER_HOME."""
from __future__ import annotations

import csv
import io
import math
import sqlite3
import threading
from types import SimpleNamespace

import pytest

from engine.config import ModelConfig
from engine.train.data import load_names
from engine.train.loop import StepRecord, TrainConfig, train
from engine.train.store import STEP_COLUMNS, RunningError, RunStore, default_path

TINY = ModelConfig(name="tiny", d_model=16, n_layers=1, n_heads=2, ffn_multiple_of=8)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path / "home"))
    return RunStore()


def test_lives_in_explorer_home_in_wal_mode(store, tmp_path):
    assert store.path == default_path() == tmp_path / "home" / "runs.sqlite"
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_steps_are_on_disk_while_the_run_is_going(store):
    seen_on_disk = []
    reader = RunStore(store.path)   # a second handle, as the app's page thread has

    def on_step(rec):
        seen_on_disk.append(len(reader.get_run(run_id())["steps"]))

    run_id = lambda: reader.list_runs()[0]["id"]  # noqa: E731
    r = train(TINY, TrainConfig(steps=4, batch=4, seq=8, eval_every=2, samples=2), load_names(), device="cpu",
              on_step=on_step, store=store)
    assert seen_on_disk == [1, 2, 3, 4]
    run = store.get_run(r.run_id)
    assert run["status"] == "finished" and run["samples"] == r.samples and run["world"] == 1
    assert run["model_config"] == r.model_config and run["train_config"]["steps"] == 4
    assert run["initial_loss"] == pytest.approx(r.initial_loss) and run["final_loss"] == pytest.approx(r.final_loss)
    assert [s["step"] for s in run["steps"]] == [1, 2, 3, 4]
    assert [s["val_loss"] is not None for s in run["steps"]] == [False, True, False, True]
    assert run["steps"][2]["train_loss"] == pytest.approx(r.records[2].train_loss)
    assert store.list_runs()[0]["tokens_per_s_spread"] == pytest.approx(r.tokens_per_s_spread)


def test_csv_has_the_step_0_val_loss_and_a_stopped_runs_final_val_loss(store):
    """The val loss before the first update (step 0) and, for a run stopped between evaluations, the val loss
    measured after its last step: both were in the run's summary but missing from its CSV."""
    stop = threading.Event()
    r = train(TINY, TrainConfig(steps=20, batch=4, seq=8, eval_every=10, samples=0), load_names(), device="cpu",
              on_step=lambda rec: stop.set() if rec.step == 3 else None, stop=stop, store=store)
    assert r.status == "stopped"
    rows = list(csv.DictReader(io.StringIO(store.export_csv(r.run_id))))
    assert [row["step"] for row in rows] == ["0", "1", "2", "3"]
    assert float(rows[0]["val_loss"]) == pytest.approx(r.initial_loss) and rows[0]["train_loss"] == ""
    assert float(rows[-1]["val_loss"]) == pytest.approx(r.final_loss)
    assert rows[1]["val_loss"] == rows[2]["val_loss"] == ""


def _finished(run_id: int) -> SimpleNamespace:
    return SimpleNamespace(run_id=run_id, status="finished", message="", initial_loss=None, final_loss=None,
                           tokens_per_s=0.0, tokens_per_s_spread=0.0, samples=[])


def test_list_reload_csv_delete(store):
    ids = []
    for name in ("a", "b"):
        rid = store.create_run(TINY.replace(name=name), TrainConfig(), "names", 123, "cpu")
        for step in (1, 2):
            store.add_step(rid, StepRecord(step, 3.0 / step, 1e-3, 0.5, 1000.0, 2.0, 3.5,
                                           val_loss=math.nan if step == 2 else None))
        ids.append(rid)
    listed = store.list_runs()
    assert [r["name"] for r in listed] == ["b", "a"] and listed[0]["steps"] == 2 and listed[0]["status"] == "running"
    text = store.export_csv(ids[0])
    assert text.split("\n")[0] == ",".join(STEP_COLUMNS) and text.count("\n") == 3 and "\r" not in text  # Unix lines
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == STEP_COLUMNS and [r["train_loss"] for r in rows] == ["3.0", "1.5"]
    assert rows[1]["val_loss"] == ""            # NaN is stored as NULL, exported as an empty cell
    with pytest.raises(RunningError, match=f"run {ids[0]} is still being trained"):
        store.delete_run(ids[0])                # this process is alive: the run is running
    for rid in ids:
        store.finish_run(_finished(rid))
    assert store.delete_run(ids[0]) and not store.delete_run(ids[0])
    assert [r["id"] for r in store.list_runs()] == [ids[1]]
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT COUNT(*) FROM steps WHERE run_id=?", (ids[0],)).fetchone()[0] == 0
    with pytest.raises(KeyError, match=f"run {ids[0]} does not exist"):
        store.get_run(ids[0])


def test_a_run_whose_process_was_killed_reads_interrupted_with_its_steps(store):
    rid = store.create_run(TINY, TrainConfig(), "names", 123, "cpu")
    for step in (1, 2, 3):
        store.add_step(rid, StepRecord(step, 3.0 / step, 1e-3, 0.5, 1000.0, 2.0, 3.5))
    assert store.list_runs()[0]["status"] == "running"       # this process is alive: still running
    with sqlite3.connect(store.path) as db:                  # as if a process that has exited had written it
        db.execute("UPDATE runs SET pid=? WHERE id=?", (2 ** 22 + 12345, rid))
    run = store.get_run(rid)
    assert run["status"] == "interrupted" and "3 stored steps" in run["message"]
    assert [s["step"] for s in run["steps"]] == [1, 2, 3]


def test_a_moe_runs_expert_load_reads_back_as_stored(store):
    """The Training page's expert-load heatmap of a reloaded MoE run: tokens per expert, one row per MoE layer."""
    rid = store.create_run(TINY, TrainConfig(), "names", 123, "cpu")
    load = [[10, 6, 8, 8], [20, 4, 4, 4]]
    store.add_step(rid, StepRecord(1, 3.0, 1e-3, 0.5, 1000.0, 2.0, 3.5, aux_loss=1.1, router_z_loss=0.2,
                                   expert_load=load))
    store.add_step(rid, StepRecord(2, 2.0, 1e-3, 0.5, 1000.0, 2.0, 3.5))
    steps = store.get_run(rid)["steps"]
    assert [s["expert_load"] for s in steps] == [load, None]
    assert (steps[0]["aux_loss"], steps[0]["router_z_loss"]) == (1.1, 0.2)
    # the file itself, as sqlite3 or a notebook reads it: a dense step has no load (NULL, as its MoE losses),
    # not the JSON text 'null' that `WHERE expert_load IS NULL` would miss
    with sqlite3.connect(store.path) as db:
        rows = db.execute("SELECT step FROM steps WHERE run_id=? AND expert_load IS NULL AND aux_loss IS NULL",
                          (rid,)).fetchall()
    assert rows == [(2,)]


def test_two_trainings_and_a_reader_share_the_store(tmp_path):
    """Two runs training at once in two threads (each with its own handle, as two sessions have) while a third
    handle keeps reading: every step of both lands, in order, and the reader never fails."""
    import threading
    path = tmp_path / "shared.sqlite"
    RunStore(path)
    tc = TrainConfig(steps=6, batch=4, seq=8, eval_every=3, samples=0)
    results, seen, errors = {}, [], []
    done = threading.Event()

    def trainer(name: str) -> None:
        results[name] = train(TINY.replace(name=name), tc, load_names(), device="cpu", store=RunStore(path))

    def reader() -> None:
        store = RunStore(path)
        while not done.is_set():
            try:
                seen.append(sum(r["steps"] for r in store.list_runs()))
            except Exception as e:   # noqa: BLE001 -- any failure of a concurrent read is the finding
                errors.append(e)

    threads = [threading.Thread(target=trainer, args=(n,)) for n in ("a", "b")]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()
    assert not errors and seen == sorted(seen)          # reads never failed, never went backwards
    store = RunStore(path)
    for name, r in results.items():
        run = store.get_run(r.run_id)
        assert run["status"] == "finished" and [s["step"] for s in run["steps"]] == list(range(1, 7))
        assert run["initial_loss"] == pytest.approx(r.initial_loss) and run["name"] == name


def test_a_recycled_pid_does_not_keep_a_run_running(store):
    """Liveness is pid + that process's start time: a live process with the same pid but another start time
    (the pid was reused after the trainer died) means the run was interrupted."""
    import os

    from engine.train.store import process_start
    rid = store.create_run(TINY, TrainConfig(), "names", 123, "cpu", initial_loss=3.25)
    assert store.list_runs()[0]["status"] == "running" and store.list_runs()[0]["initial_loss"] == 3.25
    assert process_start(os.getpid()) is not None
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE runs SET pid_start=pid_start+1 WHERE id=?", (rid,))
    assert store.get_run(rid)["status"] == "interrupted"
    assert store.delete_run(rid)   # an interrupted run can be deleted


def test_another_programs_database_is_refused_naming_its_tables(tmp_path):
    """Never add our tables to someone else's SQLite file: the refusal lists what is in it."""
    from engine.train.store import StoreError
    path = tmp_path / "theirs.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER)")
        db.execute("CREATE TABLE customers (id INTEGER)")
    with pytest.raises(StoreError, match=r"another program's SQLite database \(tables: customers, orders\)"):
        RunStore(path)
    with sqlite3.connect(path) as db:
        assert {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")} == {"orders", "customers"}


def test_a_store_from_before_the_later_columns_is_upgraded_and_keeps_every_value(tmp_path):
    """A runs.sqlite written before the pid, pid_start, tokens/s-spread and MoE step columns existed: opening
    it adds each missing column, and a run stored afterwards reads back whole (its spread, its step)."""
    from engine.train.loop import StepRecord, TrainConfig
    path = tmp_path / "old.sqlite"
    RunStore(path)
    with sqlite3.connect(path) as db:
        for col in ("pid", "pid_start", "tokens_per_s_spread"):
            db.execute(f"ALTER TABLE runs DROP COLUMN {col}")
        for col in ("aux_loss", "router_z_loss", "expert_load"):
            db.execute(f"ALTER TABLE steps DROP COLUMN {col}")
    store = RunStore(path)
    run_id = store.create_run(TINY, TrainConfig(steps=1), "names", 100, "cpu")
    store.add_step(run_id, StepRecord(1, 2.5, 1e-3, 0.5, 1000.0, 3.0, 1.0))
    store.finish_run(SimpleNamespace(**{**vars(_finished(run_id)), "tokens_per_s": 1000.0,
                                        "tokens_per_s_spread": 0.25}))
    assert store.list_runs()[0]["tokens_per_s_spread"] == 0.25
    run = store.get_run(run_id)
    assert run["status"] == "finished" and [s["train_loss"] for s in run["steps"]] == [2.5]


def test_the_default_store_is_under_the_home_folder_without_explorer_home(tmp_path, monkeypatch):
    """EXPLORER_HOME unset (or empty): ~/.explorer/runs.sqlite."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for value in (None, ""):
        if value is None:
            monkeypatch.delenv("EXPLORER_HOME", raising=False)
        else:
            monkeypatch.setenv("EXPLORER_HOME", value)
        assert default_path() == tmp_path / ".explorer" / "runs.sqlite"


def test_a_store_in_folders_that_do_not_exist_yet_creates_them(tmp_path):
    """A fresh home: EXPLORER_HOME two folders deep that nobody has made yet; the store makes them and opens empty."""
    path = tmp_path / "fresh" / "home" / "runs.sqlite"
    assert RunStore(path).list_runs() == [] and path.is_file()
