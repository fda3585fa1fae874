"""An unusable run-store file: the StoreError says which file and what to do for each way sqlite reports the
trouble, and `move_aside` renames the file with its WAL companions (nothing deleted) so a fresh store starts."""
from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

import pytest

from engine.train.store import RunStore, StoreError, _problem, move_aside

ASIDE = ("move it aside (`python -m engine runs --move-aside`, or the button on the Training page) to start a new "
         "store, or set EXPLORER_HOME to another folder")
WRITE = "check the permissions of the file and its folder, or set EXPLORER_HOME to a writable folder"


@pytest.mark.parametrize("error, kind", [
    ("attempt to write a readonly database", "write"), ("Read-only file system", "write"),
    ("Permission denied", "write"), ("unable to open database file", "write"),
    ("file is not a database", "corrupt"), ("database disk image is malformed", "corrupt"),
    ("CORRUPT page", "corrupt"), ("database is locked", "other")])
def test_each_sqlite_error_gets_its_own_message_and_fix(error, kind):
    path = Path("/x/runs.sqlite")
    e = sqlite3.OperationalError(error)
    expected = {"write": f"run store {path} cannot be written ({error}): {WRITE}",
                "corrupt": f"run store {path} is not a readable SQLite database ({error}): it is corrupt or not "
                           f"ours; {ASIDE}",
                "other": f"run store {path} cannot be used ({error}); {ASIDE}"}[kind]
    problem = _problem(path, e)
    assert type(problem) is StoreError and str(problem) == expected


def test_a_garbage_file_is_refused_untouched_then_moved_aside_with_its_wal_files(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path / "home"))        # not where the file is: the path given wins
    path = tmp_path / "runs.sqlite"
    path.write_bytes(b"garbage" * 100)
    with pytest.raises(StoreError) as refused:
        RunStore(path)
    assert str(refused.value) == (f"run store {path} is not a readable SQLite database (file is not a database): "
                                  f"it is corrupt or not ours; {ASIDE}")
    assert path.read_bytes() == b"garbage" * 100
    files = {"": b"garbage" * 100, "-wal": b"wal", "-shm": b"shm"}     # a crashed writer's companions
    for suffix, data in files.items():
        path.with_name(path.name + suffix).write_bytes(data)
    before = time.time()
    target = move_aside(path)
    after = time.time()
    assert target.parent == tmp_path and re.fullmatch(r"runs\.sqlite\.unusable-\d{8}-\d{6}", target.name)
    stamp = time.mktime(time.strptime(target.name[-15:], "%Y%m%d-%H%M%S"))
    assert int(before) - 1 <= stamp <= after
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == sorted(target.name + s for s in files)
    for suffix, data in files.items():
        assert target.with_name(target.name + suffix).read_bytes() == data
    assert RunStore(path).list_runs() == []                            # a fresh store starts in its place


def test_move_aside_defaults_to_the_store_in_explorer_home_and_needs_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=re.escape(f"run store {tmp_path / 'runs.sqlite'} does not exist; "
                                                          "nothing to move")):
        move_aside()
    (tmp_path / "runs.sqlite").write_bytes(b"x")
    target = move_aside()
    assert [p.name for p in tmp_path.iterdir()] == [target.name] and target.read_bytes() == b"x"
