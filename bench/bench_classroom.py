"""A class on one server: N students open the same link, then all change the same knob, on Streamlit's own
websocket protocol (bench/st_session.py: no browser per student, so the server is what is measured).

Per N (a fresh server each, started as `make serve` starts it: `python -m app.serve`): a teacher's session opens
the link (gpt2, Design page) and changes n_layers to 13 first, so every student's config is one another session
already opened; then N students connect at once, and once all pages are in, all N change n_layers to 13 at once.
Reported: the server process's CPU-seconds (user + system, its children included, from /proc/PID/stat) per
first page and per knob change, counted until the server is idle again (post-run work included); p50/p95 time
from a student's request to the end of its script run; the server's RSS per extra open session; and the teacher's
figures for a config nobody had opened (cold). Every student's page is checked: the exact total for its config
in the metric row, no exception.

`python -m bench classroom` (BENCH_CLASSROOM_SIZES=1,10 for fewer sizes).
"""
from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from app.serve import wait_for_health
from bench.st_session import Run, Session, run
from engine.budget.params import count_params
from engine.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
SIZES = (1, 10, 30, 100)
PRESET, KNOB, BEFORE, AFTER = "gpt2", "n_layers", 12, 13
GOAL_FIRST_CPU, GOAL_KNOB_CPU = 0.15, 0.05      # CPU-seconds per session for a config another session opened
GOAL_FIRST_P95_100, GOAL_KNOB_P95_30 = 10.0, 3.0  # seconds: 100 opening the link; 30 changing a knob at once
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of the process and its waited-for children (utime, stime, cutime, cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / TICK


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def idle_cpu(pid: int, quiet: float = 0.02, every: float = 0.5, limit: float = 120.0) -> float:
    """The process's CPU-seconds once it has used less than `quiet` seconds over `every` seconds (work after a
    script run, such as the garbage collection Streamlit runs, counts for that run)."""
    last, deadline = cpu_seconds(pid), time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(every)
        now = cpu_seconds(pid)
        if now - last < quiet:
            return now
        last = now
    return last


@contextmanager
def served(env: dict[str, str] | None = None) -> Iterator[tuple[int, str]]:
    """`python -m app.serve` (what `make serve` runs) on a free loopback port; yields (server pid, base URL)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tempfile.mkdtemp(prefix="bench_classroom_")
    full_env = {**os.environ, "EXPLORER_HOME": home, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "app.serve", "--address", "127.0.0.1", "--port", str(port)],
                            cwd=ROOT, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, proc)
        yield proc.pid, url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(home, ignore_errors=True)   # the sessions' stored runs: a test or bench run leaves none behind


def total_text(n_layers: int) -> str:
    return f"{count_params(PRESETS[PRESET].config.replace(n_layers=n_layers)).total:,}"


def check(runs: list[Run], n_layers: int, what: str) -> None:
    want = total_text(n_layers)
    for i, run in enumerate(runs):
        if run.exceptions or want not in run.texts:
            raise RuntimeError(f"{what}, session {i}: expected total {want}; exceptions {run.exceptions[:2]}")


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] if len(values) > 1 else values[0]


@dataclass
class Row:
    n: int
    first_cpu: float          # CPU-s per student's first page (the config was opened before)
    first_p50: float
    first_p95: float
    knob_cpu: float           # CPU-s per student's knob change (to a config opened before)
    knob_p50: float
    knob_p95: float
    rss_per_session: float    # bytes
    rss_total: int            # bytes, with every student connected
    cold_first_cpu: float     # the teacher's first page on a fresh server (imports included)
    cold_knob_cpu: float      # the teacher's change to a config nobody had opened
    cold_knob_s: float


async def classroom(pid: int, url: str, n: int) -> Row:
    query = f"preset={PRESET}"
    c0 = cpu_seconds(pid)
    teacher, first = await Session.open(url, query)
    c1 = idle_cpu(pid)
    change = await teacher.set_widget(KNOB, AFTER)
    c2 = idle_cpu(pid)
    check([first], BEFORE, "teacher's first page")
    check([change], AFTER, "teacher's knob change")
    rss0 = rss_bytes(pid)
    opened = await asyncio.gather(*(Session.open(url, query) for _ in range(n)))
    c3 = idle_cpu(pid)
    rss1 = rss_bytes(pid)
    students = [s for s, _ in opened]
    check([r for _, r in opened], BEFORE, "first page")
    changes = await asyncio.gather(*(s.set_widget(KNOB, AFTER) for s in students))
    c4 = idle_cpu(pid)
    check(changes, AFTER, "knob change")
    await asyncio.gather(*(s.close() for s in (teacher, *students)))
    firsts, knobs = [r.seconds for _, r in opened], [r.seconds for r in changes]
    return Row(n, (c3 - c2) / n, statistics.median(firsts), quantile(firsts, 0.95), (c4 - c3) / n,
               statistics.median(knobs), quantile(knobs, 0.95), (rss1 - rss0) / n, rss1, c1 - c0, c2 - c1,
               change.seconds)


def measure(sizes: tuple[int, ...] = SIZES, env: dict[str, str] | None = None) -> list[Row]:
    rows = []
    for n in sizes:
        with served(env) as (pid, url):
            rows.append(run(classroom(pid, url, n)))
    return rows


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(rows: list[Row]) -> None:
    print(f"  {'N':>4} {'first page CPU':>15} {'p50':>7} {'p95':>7} {'knob CPU':>9} {'p50':>7} {'p95':>7} "
          f"{'RSS/session':>12} {'RSS':>9}   cold: first page CPU, knob CPU (s)")
    for r in rows:
        print(f"  {r.n:>4} {r.first_cpu:>13.3f} s {r.first_p50:>6.2f}s {r.first_p95:>6.2f}s {r.knob_cpu:>7.3f} s "
              f"{r.knob_p50:>6.2f}s {r.knob_p95:>6.2f}s {r.rss_per_session / 2**20:>8.2f} MiB "
              f"{r.rss_total / 2**20:>5.0f} MiB   {r.cold_first_cpu:.2f}, {r.cold_knob_cpu:.3f} "
              f"({r.cold_knob_s:.2f} s)")
    worst_first, worst_knob = max(r.first_cpu for r in rows), max(r.knob_cpu for r in rows)
    print(f"  CPU per first page, worst {worst_first:.3f} s (goal <= {GOAL_FIRST_CPU}): "
          f"{verdict(worst_first <= GOAL_FIRST_CPU)}; per knob change, worst {worst_knob:.3f} s "
          f"(goal <= {GOAL_KNOB_CPU}): {verdict(worst_knob <= GOAL_KNOB_CPU)}")
    for n, attr, goal, what in ((100, "first_p95", GOAL_FIRST_P95_100, "100 opening the link"),
                                (30, "knob_p95", GOAL_KNOB_P95_30, "30 knob changes at once")):
        row = next((r for r in rows if r.n == n), None)
        if row is not None:
            value = getattr(row, attr)
            print(f"  {what}: p95 {value:.2f} s (goal <= {goal:.0f} s): {verdict(value <= goal)}")


def main() -> None:
    sizes = tuple(int(n) for n in os.environ.get("BENCH_CLASSROOM_SIZES", ",".join(map(str, SIZES))).split(","))
    load = os.getloadavg()
    print(f"Classroom: N sessions on Streamlit's websocket protocol against `python -m app.serve`, {PRESET}, Design "
          f"page, {KNOB} {BEFORE} -> {AFTER}; {os.cpu_count()} CPUs, load average {load[0]:.1f} "
          f"(5 min {load[1]:.1f}), {time.strftime('%Y-%m-%d %H:%M')}")
    report(measure(sizes))
    print(f"  load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
