"""Training runs persist in SQLite at $EXPLORER_HOME/runs.sqlite (default ~/.explorer/).

WAL mode and one commit per step: a killed process loses at most the step being written, and a reader
(the app polling a live run) never blocks the writer. Each call opens its own short-lived connection, so
the store is safe to use from the background training thread and the page thread at once.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import sqlite3
import time
from contextlib import closing, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from engine.config import ModelConfig

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL,
    status TEXT NOT NULL, message TEXT NOT NULL DEFAULT '', params INTEGER NOT NULL, device TEXT NOT NULL,
    world INTEGER NOT NULL, model_config TEXT NOT NULL, train_config TEXT NOT NULL, initial_loss REAL,
    final_loss REAL, tokens_per_s REAL, samples TEXT NOT NULL DEFAULT '[]', pid INTEGER);
CREATE TABLE IF NOT EXISTS steps (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
    train_loss REAL, val_loss REAL, lr REAL, grad_norm REAL, tokens_per_s REAL, max_logit REAL, log_z REAL,
    aux_loss REAL, router_z_loss REAL, expert_load TEXT, PRIMARY KEY (run_id, step));
"""
STEP_COLUMNS = ("step", "train_loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "max_logit", "log_z",
                "aux_loss", "router_z_loss")
# MoE runs: tokens per expert per MoE layer at each step, JSON [[...], ...] (null for dense models)
_MOE_STEP_COLUMNS = (("aux_loss", "REAL"), ("router_z_loss", "REAL"), ("expert_load", "TEXT"))
RUN_COLUMNS = ("id", "created", "name", "data", "status", "message", "params", "device", "world",
               "initial_loss", "final_loss", "tokens_per_s")


def default_path() -> Path:
    return Path(os.environ.get("EXPLORER_HOME") or Path.home() / ".explorer") / "runs.sqlite"


def _num(v: float | None) -> float | None:
    """SQLite has no NaN; store non-finite numbers as NULL."""
    return v if v is None or math.isfinite(v) else None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunStore:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            if "pid" not in {r["name"] for r in db.execute("PRAGMA table_info(runs)")}:
                db.execute("ALTER TABLE runs ADD COLUMN pid INTEGER")  # a store from before pids were kept
            have = {r["name"] for r in db.execute("PRAGMA table_info(steps)")}
            for column, kind in _MOE_STEP_COLUMNS:   # a store from before MoE runs were kept
                if column not in have:
                    db.execute(f"ALTER TABLE steps ADD COLUMN {column} {kind}")

    def _mark_interrupted(self, db: sqlite3.Connection) -> None:
        """A 'running' run whose process is gone was killed: say so, keeping every step it stored."""
        for row in db.execute("SELECT id, pid FROM runs WHERE status='running'").fetchall():
            if not _alive(row["pid"]):
                n = db.execute("SELECT COUNT(*) FROM steps WHERE run_id=?", (row["id"],)).fetchone()[0]
                db.execute("UPDATE runs SET status='interrupted', message=? WHERE id=?",
                           (f"the process running it ended after {n} stored steps; the curve so far is kept",
                            row["id"]))

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(self.path, timeout=30)) as db:
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA foreign_keys=ON")
            with db:  # one transaction, committed on exit
                yield db

    def create_run(self, cfg: ModelConfig, tc: Any, data: str, params: int, device: str, world: int = 1) -> int:
        with self._db() as db:
            cur = db.execute(
                "INSERT INTO runs (created, name, data, status, params, device, world, model_config, train_config,"
                " pid) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (time.time(), cfg.name, data, params, device, world, cfg.to_yaml(), json.dumps(asdict(tc)),
                 os.getpid()))
            return int(cur.lastrowid)

    def add_step(self, run_id: int, rec: Any) -> None:
        row = asdict(rec)
        with self._db() as db:
            load = row.get("expert_load")
            db.execute(f"INSERT OR REPLACE INTO steps (run_id, {', '.join(STEP_COLUMNS)}, expert_load) "
                       f"VALUES (?, {', '.join('?' * len(STEP_COLUMNS))}, ?)",
                       (run_id, *(_num(row.get(c)) for c in STEP_COLUMNS),
                        None if load is None else json.dumps(load)))

    def finish_run(self, result: Any) -> None:
        with self._db() as db:
            db.execute("UPDATE runs SET status=?, message=?, initial_loss=?, final_loss=?, tokens_per_s=?, "
                       "samples=? WHERE id=?",
                       (result.status, result.message, _num(result.initial_loss), _num(result.final_loss),
                        _num(result.tokens_per_s), json.dumps(result.samples), result.run_id))

    def list_runs(self) -> list[dict[str, Any]]:
        """Newest first, with the number of steps stored so far."""
        with self._db() as db:
            self._mark_interrupted(db)
            rows = db.execute(f"SELECT {', '.join('r.' + c for c in RUN_COLUMNS)}, "
                              "(SELECT COUNT(*) FROM steps s WHERE s.run_id = r.id) AS steps "
                              "FROM runs r ORDER BY r.id DESC").fetchall()
        return [dict(r) for r in rows]

    def get_run(self, run_id: int) -> dict[str, Any]:
        """The run's row (configs parsed back) plus its steps as a list of dicts."""
        with self._db() as db:
            self._mark_interrupted(db)
            row = db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
            if row is None:
                raise KeyError(f"run {run_id} does not exist")
            steps = db.execute(f"SELECT {', '.join(STEP_COLUMNS)}, expert_load FROM steps WHERE run_id=? "
                               "ORDER BY step", (run_id,)).fetchall()
        run = dict(row)
        run["model_config"] = ModelConfig.from_yaml(run["model_config"])
        run["train_config"] = json.loads(run["train_config"])
        run["samples"] = json.loads(run["samples"])
        run["steps"] = [dict(s, expert_load=json.loads(s["expert_load"]) if s["expert_load"] else None)
                        for s in steps]
        return run

    def delete_run(self, run_id: int) -> bool:
        with self._db() as db:
            return db.execute("DELETE FROM runs WHERE id=?", (run_id,)).rowcount > 0

    def export_csv(self, run_id: int) -> str:
        """One row per step, the step columns as header; empty cells where a value was not measured."""
        steps = self.get_run(run_id)["steps"]
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=STEP_COLUMNS, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(steps)
        return out.getvalue()
