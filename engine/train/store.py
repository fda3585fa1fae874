"""Training runs persist in SQLite at $EXPLORER_HOME/runs.sqlite (default ~/.explorer/).

WAL mode and one commit per step: a killed process loses at most the step being written, and a reader
(the app polling a live run) never blocks the writer. Each call opens its own short-lived connection, so
the store is safe to use from the background training thread and the page thread at once.

The store is shared (several app sessions, CLI runs) and the user's: a run whose process is alive (pid and
that process's start time, so a reused pid does not count) cannot be deleted; a file that is not our store
(corrupt, truncated, empty, another program's database, unreadable or read-only) raises StoreError naming the
file and what to do, and is never modified or deleted: `move_aside` renames it so a fresh store can start.
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
    final_loss REAL, tokens_per_s REAL, tokens_per_s_spread REAL, samples TEXT NOT NULL DEFAULT '[]', pid INTEGER);
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
               "initial_loss", "final_loss", "tokens_per_s", "tokens_per_s_spread")


def default_path() -> Path:
    return Path(os.environ.get("EXPLORER_HOME") or Path.home() / ".explorer") / "runs.sqlite"


def _num(v: float | None) -> float | None:
    """SQLite has no NaN; store non-finite numbers as NULL."""
    return v if v is None or math.isfinite(v) else None


class StoreError(Exception):
    """The run store file cannot be used; the message names it and says what to do."""


class RunningError(ValueError):
    """The run is still being trained by a live process."""


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks after boot (/proc/PID/stat field 22), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return int(f.read().rpartition(")")[2].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int | None, start: int | None = None) -> bool:
    """Is the process that wrote the run still running? A recycled pid has another start time."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return not isinstance(pid, bool) and pid > 0
    now = process_start(pid)
    return start is None or now is None or now == start


def _problem(path: Path, e: Exception) -> StoreError:
    """One message per way the file can be unusable, each with the fix."""
    text = str(e).lower()
    aside = ("move it aside (`python -m engine runs --move-aside`, or the button on the Training page) to start a "
             "new store, or set EXPLORER_HOME to another folder")
    if "readonly" in text or "read-only" in text or "permission" in text or "unable to open" in text:
        return StoreError(f"run store {path} cannot be written ({e}): check the permissions of the file and its "
                          f"folder, or set EXPLORER_HOME to a writable folder")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return StoreError(f"run store {path} is not a readable SQLite database ({e}): it is corrupt or not ours; "
                          + aside)
    return StoreError(f"run store {path} cannot be used ({e}); " + aside)


def move_aside(path: str | Path | None = None) -> Path:
    """Rename an unusable store (and its WAL files) to runs.sqlite.unusable-TIMESTAMP beside it, so a fresh
    store can start; nothing is deleted. Returns the new path of the main file."""
    path = Path(path) if path else default_path()
    if not path.exists():
        raise FileNotFoundError(f"run store {path} does not exist; nothing to move")
    target = path.with_name(f"{path.name}.unusable-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        src = path.with_name(path.name + suffix)
        if src.exists():
            src.rename(target.with_name(target.name + suffix))
    return target


class RunStore:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_path()
        aside = "move it aside (`python -m engine runs --move-aside`, or the button on the Training page)"
        if self.path.is_dir():
            raise StoreError(f"run store {self.path} is a folder, not a file: rename it or set EXPLORER_HOME")
        if self.path.exists() and self.path.stat().st_size == 0:
            raise StoreError(f"run store {self.path} is empty (0 bytes), so its runs were lost or it was truncated; "
                             f"{aside} to start a new store")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"run store {self.path}: cannot create its folder ({e.strerror}); set EXPLORER_HOME "
                             f"to a writable folder") from None
        with self._db() as db:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables and "runs" not in tables:   # someone else's database: never add our tables to it
                raise StoreError(f"run store {self.path} is another program's SQLite database (tables: "
                                 f"{', '.join(sorted(tables)[:5])}); {aside} or set EXPLORER_HOME")
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            columns = {r["name"] for r in db.execute("PRAGMA table_info(runs)")}
            if not {"id", "status", "name"} <= columns:
                raise StoreError(f"run store {self.path} has a `runs` table that is not ours; {aside}")
            for col, kind in (("pid", "INTEGER"), ("pid_start", "INTEGER"), ("tokens_per_s_spread", "REAL")):
                if col not in columns:   # a store from before pids, start times or the tokens/s spread were kept
                    db.execute(f"ALTER TABLE runs ADD COLUMN {col} {kind}")
            have = {r["name"] for r in db.execute("PRAGMA table_info(steps)")}
            for column, kind in _MOE_STEP_COLUMNS:   # a store from before MoE runs were kept
                if column not in have:
                    db.execute(f"ALTER TABLE steps ADD COLUMN {column} {kind}")

    def _mark_interrupted(self, db: sqlite3.Connection) -> None:
        """A 'running' run whose process is gone was killed: say so, keeping every step it stored."""
        for row in db.execute("SELECT id, pid, pid_start FROM runs WHERE status='running'").fetchall():
            if not _alive(row["pid"], row["pid_start"]):
                n = db.execute("SELECT COUNT(*) FROM steps WHERE run_id=?", (row["id"],)).fetchone()[0]
                db.execute("UPDATE runs SET status='interrupted', message=? WHERE id=?",
                           (f"the process running it ended after {n} stored steps; the curve so far is kept",
                            row["id"]))

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            with closing(sqlite3.connect(self.path, timeout=30)) as db:
                db.row_factory = sqlite3.Row
                db.execute("PRAGMA foreign_keys=ON")
                with db:  # one transaction, committed on exit
                    yield db
        except sqlite3.DatabaseError as e:   # corrupt, truncated, locked for 30 s, read-only, ...
            raise _problem(self.path, e) from None

    def create_run(self, cfg: ModelConfig, tc: Any, data: str, params: int, device: str, world: int = 1,
                   initial_loss: float | None = None) -> int:
        """A new 'running' run of this process; `initial_loss` (measured before the first update) is kept even
        if the process dies before finishing."""
        with self._db() as db:
            cur = db.execute(
                "INSERT INTO runs (created, name, data, status, params, device, world, model_config, train_config,"
                " pid, pid_start, initial_loss) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
                (time.time(), cfg.name, data, params, device, world, cfg.to_yaml(), json.dumps(asdict(tc)),
                 os.getpid(), process_start(os.getpid()), _num(initial_loss)))
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
                       "tokens_per_s_spread=?, samples=? WHERE id=?",
                       (result.status, result.message, _num(result.initial_loss), _num(result.final_loss),
                        _num(result.tokens_per_s), _num(result.tokens_per_s_spread),
                        json.dumps(result.samples), result.run_id))

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
        """Delete a finished, stopped, diverged or interrupted run; RunningError while its process is alive."""
        with self._db() as db:
            self._mark_interrupted(db)
            row = db.execute("SELECT status, pid FROM runs WHERE id=?", (run_id,)).fetchone()
            if row is not None and row["status"] == "running":
                raise RunningError(f"run {run_id} is still being trained (process {row['pid']}); stop it first, "
                                   f"or wait until it ends")
            return db.execute("DELETE FROM runs WHERE id=?", (run_id,)).rowcount > 0

    def export_csv(self, run_id: int) -> str:
        """One row per step, the step columns as header; empty cells where a value was not measured. Step 0 holds
        the val loss before the first update (the run's initial_loss)."""
        run = self.get_run(run_id)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=STEP_COLUMNS, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        if run["initial_loss"] is not None:
            writer.writerow({"step": 0, "val_loss": run["initial_loss"]})
        writer.writerows(run["steps"])
        return out.getvalue()
