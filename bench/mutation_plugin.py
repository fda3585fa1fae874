"""pytest plugin for `make mutate-sample` (loaded by bench/mutation_run.py inside mutmut's mutants/ copy).

One pytest process collects the engine tests once; then, instead of pytest's own loop:
  1. coverage: `jobs` forked children run every test (test files handed out through a pipe, largest first) with
     mutmut's trampolines in "stats" mode, recording per test its CPU seconds, whether it failed, and which of
     the sampled mutants' functions it called;
  2. mutants: for each sampled mutant, a forked child switches the trampolines to that mutant and runs only the
     tests that called its function, cheapest file first, stopping at the first failure; a CPU-time limit
     (RLIMIT_CPU, blind to the load) and a generous wall limit end a mutant that hangs: status "timeout".
Forking after collection costs milliseconds, where a fresh pytest per mutant costs seconds of imports.
Results go to the plan's folder as they come (results.jsonl), so a stopped run keeps what it checked.
"""
from __future__ import annotations

import functools
import json
import os
import resource
import signal
import struct
import sys
import time
from pathlib import Path

import pytest
from _pytest.runner import runtestprotocol

CPU_FACTOR, CPU_EXTRA = 5, 30       # a mutant may use 5x its tests' clean CPU time + 30 s before "timeout"
WALL_FACTOR, WALL_EXTRA = 60, 600   # backstop for a mutant that hangs without using CPU (seen: wall = 26x CPU at load 23)
TIMEOUT_SIGNALS = (signal.SIGXCPU, signal.SIGKILL)


def _plan() -> dict:
    return json.loads(Path(os.environ["MUTATE_PLAN"]).read_text())


def _run_items(items: list, stop_on_failure: bool) -> tuple[str | None, dict[str, dict]]:
    """Run items in order (module fixtures shared between neighbours); first failing nodeid and per-test data."""
    from mutmut.state import state
    per_test = {}
    for i, item in enumerate(items):
        state()._stats.clear()
        cpu = time.process_time()
        reports = runtestprotocol(item, log=False, nextitem=items[i + 1] if i + 1 < len(items) else None)
        failed = any(r.failed for r in reports)
        per_test[item.nodeid] = {"cpu": time.process_time() - cpu, "failed": failed, "hits": sorted(state()._stats)}
        if failed and stop_on_failure:
            return item.nodeid, per_test
    return None, per_test


def _clear_engine_caches() -> None:
    """lru_caches filled during collection hold the unmutated code's answers."""
    for name, mod in list(sys.modules.items()):
        if name == "engine" or name.startswith("engine."):
            for obj in list(vars(mod).values()):
                for f in [obj, *vars(obj).values()] if isinstance(obj, type) else [obj]:
                    if isinstance(f, functools._lru_cache_wrapper):
                        f.cache_clear()


def _child(body) -> int:
    """Fork; the child runs body() silenced and exits with its return value (3 on an internal error)."""
    pid = os.fork()
    if pid:
        return pid
    code = 3
    try:
        sys.stdout = sys.stderr = open(os.devnull, "w")
        code = body()
    finally:
        os._exit(code)


def _coverage(session, plan: dict, out: Path) -> dict[str, dict]:
    from mutmut.mutation.trampoline import set_mutant_under_test
    wanted = set(plan["functions"])
    files: dict[str, list] = {}
    for item in session.items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = sorted(files, key=lambda f: -len(files[f]))
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"".join(struct.pack("!I", i) for i in range(len(order))))
    os.close(write_fd)

    def worker(k: int) -> int:
        set_mutant_under_test("stats")
        data = {}
        while chunk := os.read(read_fd, 4):               # 4-byte reads from a pipe are atomic
            _, per_test = _run_items(files[order[struct.unpack("!I", chunk)[0]]], stop_on_failure=False)
            for test, d in per_test.items():
                d["hits"] = [h for h in d["hits"] if h in wanted]
            data.update(per_test)
        (out / f"coverage-{k}.json").write_text(json.dumps(data))
        return 0

    pids = [_child(functools.partial(worker, k)) for k in range(plan["jobs"])]
    os.close(read_fd)
    cpu = 0.0
    for pid in pids:
        _, status, usage = os.wait4(pid, 0)
        cpu += usage.ru_utime + usage.ru_stime
        if os.waitstatus_to_exitcode(status):
            raise pytest.UsageError(f"a coverage worker exited with {os.waitstatus_to_exitcode(status)}")
    (out / "coverage-cpu.json").write_text(json.dumps(cpu))
    data = {}
    for k in range(plan["jobs"]):
        data.update(json.loads((out / f"coverage-{k}.json").read_text()))
    return data


def _mutants(session, plan: dict, out: Path, coverage: dict[str, dict]) -> None:
    from mutmut.mutation.trampoline import set_mutant_under_test
    from mutmut.utils.format_utils import mangled_name_from_mutant_name
    by_id = {item.nodeid: item for item in session.items}
    covering: dict[str, list[str]] = {}
    for test, d in coverage.items():
        if not d["failed"]:
            for fn in d["hits"]:
                covering.setdefault(fn, []).append(test)
    index = {item.nodeid: i for i, item in enumerate(session.items)}
    results = out / "results.jsonl"
    results.touch()                          # a deadline passed before the first mutant: all "not checked"
    queue = list(plan["mutants"])
    running: dict[int, tuple[str, float, float, Path, int]] = {}
    deadline = plan.get("deadline") or float("inf")
    done = 0

    def tests_for(mutant: str) -> list:
        tests = covering.get(mangled_name_from_mutant_name(mutant), [])
        by_file: dict[str, list[str]] = {}
        for t in sorted(tests, key=index.__getitem__):
            by_file.setdefault(t.split("::")[0], []).append(t)
        # cheapest files (CPU per test) first; a file's tests in collection order, sharing module fixtures
        files = sorted(by_file.values(), key=lambda ts: sum(coverage[t]["cpu"] for t in ts) / len(ts))
        return [by_id[t] for ts in files for t in ts]

    def record(mutant: str, status: str, **extra) -> None:
        nonlocal done
        done += 1
        with results.open("a") as f:
            f.write(json.dumps({"mutant": mutant, "status": status, **extra}) + "\n")
        print(f"[{done}/{len(plan['mutants'])}] {status:9} {mutant} "
              f"({extra.get('wall', 0):.1f} s)", file=sys.__stderr__, flush=True)

    while queue or running:
        while queue and len(running) < plan["jobs"] and time.time() < deadline:
            mutant = queue.pop(0)
            items = tests_for(mutant)
            if not items:
                record(mutant, "no tests", tests=0, wall=0.0)
                continue
            clean_cpu = sum(coverage[i.nodeid]["cpu"] for i in items)
            note = out / "killers" / mutant

            def body(mutant=mutant, items=items, clean_cpu=clean_cpu, note=note) -> int:
                limit = int(CPU_FACTOR * clean_cpu + CPU_EXTRA + time.process_time())
                resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))
                _clear_engine_caches()
                set_mutant_under_test(mutant)
                killer, per_test = _run_items(items, stop_on_failure=True)
                note.write_text(json.dumps({"killer": killer, "ran": len(per_test)}))
                return 1 if killer else 0

            pid = _child(body)
            running[pid] = (mutant, time.time(), WALL_FACTOR * clean_cpu + WALL_EXTRA, note, len(items))
        if not running:
            break
        pid, status, usage = os.wait4(-1, os.WNOHANG)
        if not pid:
            for p, (mutant, start, wall, *_) in running.items():
                if time.time() - start > wall:
                    os.kill(p, signal.SIGKILL)
            time.sleep(0.05)
            continue
        mutant, start, _, note, n_tests = running.pop(pid)
        info = json.loads(note.read_text()) if note.exists() else {}
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in TIMEOUT_SIGNALS:
            verdict = "timeout"
        else:
            verdict = "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
        record(mutant, verdict, wall=time.time() - start, cpu=usage.ru_utime + usage.ru_stime, tests=n_tests, **info)
    for mutant in queue:
        record(mutant, "not checked")


def pytest_configure(config) -> None:
    config._mutate_started = time.time()
    import torch
    torch.set_num_threads(1)         # a forked child of a multi-threaded OpenMP pool can wait forever on a lock


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session) -> bool:
    if session.config.option.collectonly:
        return True
    import engine
    here = Path.cwd().resolve()
    if not Path(engine.__file__).resolve().is_relative_to(here):
        raise pytest.UsageError(f"engine imported from {engine.__file__}, not from the mutants in {here}")
    plan = _plan()
    out = Path(plan["out"])
    (out / "killers").mkdir(parents=True, exist_ok=True)
    timing = {"collect_s": time.time() - session.config._mutate_started, "collect_cpu": time.process_time()}
    started = time.time()
    coverage = _coverage(session, plan, out)
    (out / "coverage.json").write_text(json.dumps(coverage))
    timing.update(coverage_s=time.time() - started, coverage_cpu=json.loads((out / "coverage-cpu.json").read_text()))
    (out / "timing.json").write_text(json.dumps(timing))
    started = time.time()
    _mutants(session, plan, out, coverage)
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    timing.update(mutants_s=time.time() - started, mutants_cpu=sum(r.get("cpu", 0) for r in results))
    (out / "timing.json").write_text(json.dumps(timing))
    return True
