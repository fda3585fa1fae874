"""The app as a class server (issue #26), driven on Streamlit's own websocket protocol (bench/st_session.py):
`make serve` answers; twenty sessions that each start a short training run share one queue (at most the limit
train at once, every run finishes or is cancelled, none is lost) while a knob change in another session settles."""
from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.serve import wait_for_health
from bench.bench_classroom import served
from bench.st_session import Session, run
from engine.budget.params import count_params
from engine.presets import PRESETS
from tests.torchrun_runs import free_port

ROOT = Path(__file__).resolve().parents[1]
LIMIT, STUDENTS, STOPPED = 2, 20, 4
# a short run: the queue's behaviour does not depend on a run's length, and each gpt2 step costs a tenth of a CPU-second
RUN = "preset=gpt2&train_steps=12&train_batch=4&train_seq=8&train_eval_every=6"
HOLD = RUN.replace("train_steps=12", "train_steps=100000")   # holds a slot until stopped
KNOB_SETTLES_S = 2.0


def total(n_layers: int) -> str:
    return f"{count_params(PRESETS['gpt2'].config.replace(n_layers=n_layers)).total:,}"


@pytest.mark.slow
def test_make_serve_answers_with_the_app(tmp_path):
    port = free_port()
    env = {**os.environ, "PORT": str(port), "ADDRESS": "127.0.0.1", "EXPLORER_HOME": str(tmp_path)}
    proc = subprocess.Popen(["make", "-s", "serve"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for_health(url, proc) == b"ok", f"make serve did not answer on {url}"

        async def first_page():
            session, run = await Session.open(url, "preset=gpt2")
            await session.close()
            return run

        page = run(first_page())
        assert not page.exceptions and total(12) in page.texts
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def test_serve_refuses_a_bad_option_by_name():
    done = subprocess.run([sys.executable, "-m", "app.serve", "--jobs", "0"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert "EXPLORER_JOBS (--jobs): 0 is below the minimum 1" in done.stderr


def _runs(db: Path) -> list[tuple[int, str]]:
    if not db.exists():
        return []
    with sqlite3.connect(db) as con:
        try:
            return con.execute("SELECT id, status FROM runs ORDER BY id").fetchall()
        except sqlite3.OperationalError:   # the store is being created
            return []


async def _until(condition, what: str, timeout: float = 1200) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        await asyncio.sleep(0.2)


async def check_classroom(url: str, db: Path) -> None:
    """Two long runs hold both slots first, so the queue holds the others whatever the machine's speed: the knob
    change lands while they wait, then the long runs are stopped and the queue drains."""
    designer, _ = await Session.open(url, "preset=gpt2")
    holders = [s for s, _ in await asyncio.gather(*(Session.open(url, HOLD, page="training") for _ in range(LIMIT)))]
    for s in holders:
        assert not (await s.click("Start training")).exceptions
    await _until(lambda: sum(status == "running" for _, status in _runs(db)) == LIMIT, "both slots running")
    students = [s for s, _ in await asyncio.gather(*(Session.open(url, RUN, page="training")
                                                     for _ in range(STUDENTS - LIMIT)))]
    clicks = await asyncio.gather(*(s.click("Start training") for s in students))
    assert not any(c.exceptions for c in clicks)
    assert all(any("Waiting for a free slot" in t for t in c.texts) for c in clicks)   # both slots are held
    stopped = list(range(len(students)))[-STOPPED:]              # the last in line leave while they wait
    await asyncio.gather(*(students[i].click("Stop") for i in stopped))

    most, done = 0, asyncio.Event()

    async def watch() -> None:   # the store as the runs go: never more than the limit training at once
        nonlocal most
        while not done.is_set():
            most = max(most, sum(status == "running" for _, status in _runs(db)))
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    change = await designer.set_widget("n_layers", 13)            # another session, while the others queue
    assert change.seconds < KNOB_SETTLES_S and total(13) in change.texts and not change.exceptions
    assert len(_runs(db)) == LIMIT                                # still only the two holders have started
    await asyncio.gather(*(s.click("Stop") for s in holders))
    await _until(lambda: (len(rows := _runs(db)) >= STUDENTS - STOPPED
                          and all(status != "running" for _, status in rows)), "every queued run over")
    done.set()
    await watcher
    assert most <= LIMIT
    everyone = [*holders, *students]
    pages = await asyncio.gather(*(s.rerun() for s in everyone))
    left_queue = [i for i in stopped if any("Stopped while waiting in the queue" in t
                                            for t in pages[LIMIT + i].texts)]
    assert left_queue == stopped
    rows = _runs(db)
    assert len(rows) + len(left_queue) == STUDENTS                 # none lost: stored, or left the queue
    assert [status for _, status in rows[:LIMIT]] == ["stopped"] * LIMIT, rows
    assert [status for _, status in rows[LIMIT:]] == ["finished"] * (STUDENTS - LIMIT - STOPPED), rows
    for i, page in enumerate(pages):   # each student's page shows its own run's outcome
        if i - LIMIT not in left_queue:
            assert sum("(run " in t and " params):" in t for t in page.texts) == 1, page.texts
    await asyncio.gather(*(s.close() for s in (designer, *everyone)))


@pytest.mark.slow
def test_twenty_sessions_train_through_one_queue(tmp_path):
    home = tmp_path / "home"
    with served({"EXPLORER_JOBS": str(LIMIT), "EXPLORER_HOME": str(home)}) as (_, url):
        run(check_classroom(url, home / "runs.sqlite"))
