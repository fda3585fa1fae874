"""Timing in interleaved rounds with an adaptive stop: how every latency figure in the app is measured.

Round r calls every compared function once (starting at function r mod n, so none is always first), so a burst
of load from another process hits all of them alike instead of one variant's whole measurement. Rounds continue
until each series is tight (IQR <= TARGET_SPREAD of the median, after MIN_ROUNDS rounds) or the time budget is
spent. Median and IQR, never the mean: one hiccup should not move the number. A series whose IQR exceeds
NOISY_SPREAD of its median is flagged noisy: its middle half spans more than a quarter of the value, so a
difference between variants smaller than that cannot be read from the chart.
GPU: CUDA events around each call and a synchronize (kernels are asynchronous; a wall clock would time the
launch). CPU: perf_counter around the call, with the threads the machine can give (cpu_threads).
"""
from __future__ import annotations

import math
import os
import statistics
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch

MIN_ROUNDS = 5             # quartiles of fewer samples say little
MAX_ROUNDS = 200           # tiny models reach a tight spread long before this
TARGET_SPREAD = 0.05       # stop early once every series' IQR is within 5% of its median
NOISY_SPREAD = 0.25        # flag a series whose IQR exceeds a quarter of its median
LOCK = threading.RLock()   # held while anything is timed in this process: two sessions would each get half a machine


def busy() -> bool:
    """Another thread of this process is timing (or probing) right now."""
    if LOCK.acquire(blocking=False):
        LOCK.release()
        return False
    return True


def cpu_threads() -> int:
    """Threads to time with on CPU: all of torch's intra-op threads, unless other processes keep cores busy
    (1-minute load average); then the cores left free, at least one. Threads that share fewer cores than they
    are wait at every parallel region for a descheduled partner: on this 2-core machine at load 8, a tiny
    forward took 544 ms on 2 threads and 1.5 ms on 1."""
    n = torch.get_num_threads()
    try:
        free = (os.cpu_count() or n) - os.getloadavg()[0]
    except OSError:
        return n
    return max(1, min(n, round(free)))


@contextmanager
def timing_session(dev: torch.device) -> Iterator[None]:
    """Hold the process-wide lock and, on CPU, run with cpu_threads() threads; the thread count is restored."""
    with LOCK:
        if dev.type != "cpu":
            yield
            return
        n = torch.get_num_threads()
        torch.set_num_threads(cpu_threads())
        try:
            yield
        finally:
            torch.set_num_threads(n)


@dataclass(frozen=True)
class Timing:
    median_s: float
    iqr_s: float
    runs: int

    @property
    def spread(self) -> float:
        """IQR / median: the relative width of the middle half of the samples."""
        return self.iqr_s / self.median_s if self.median_s > 0 else 0.0

    @property
    def noisy(self) -> bool:
        return self.spread > NOISY_SPREAD


def summarize(times: Sequence[float]) -> Timing:
    q1, _, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else (times[0],) * 3
    return Timing(statistics.median(times), q3 - q1, len(times))


@dataclass(frozen=True)
class Progress:
    rounds: int               # rounds finished
    elapsed_s: float          # since the first timed round (warm-up excluded)
    left_s: float             # at most this much more: the rounds still required, or what is left of the budget
    timings: list[Timing]     # each series over the rounds so far


def _timer(dev: torch.device) -> Callable[[Callable[[], object]], float]:
    if dev.type == "cuda":
        def cuda_time(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(dev)
            return start.elapsed_time(end) / 1e3
        return cuda_time

    def cpu_time(fn):
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t
    return cpu_time


MAX_BUDGET_S = 600.0   # seconds of timing for one measurement; more is a typo, not a measurement


def check_budget(budget_s: float) -> None:
    """The time budget must be a finite number of seconds in (0, MAX_BUDGET_S]: nan would never end the rounds."""
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not 0 < budget_s <= MAX_BUDGET_S:
        raise ValueError(f"time_budget: {budget_s!r} is not a number of seconds > 0 and <= {MAX_BUDGET_S:g}")


def interleaved(fns: Sequence[Callable[[], object]], dev: torch.device, budget_s: float, warmup: int = 1,
                min_rounds: int = MIN_ROUNDS, on_round: Callable[[Progress], None] | None = None,
                stop: threading.Event | None = None, target_spread: float = TARGET_SPREAD) -> list[Timing]:
    """Median and IQR (seconds) of each fn, timed in interleaved rounds (callers hold a timing_session).
    Stops after min_rounds once every spread is <= target_spread, or once budget_s is spent, or when `stop` is
    set (after at least one round). A budget of 0 times min_rounds rounds; user input is held to check_budget's
    range where it enters (measure_latency, the sweep's settings)."""
    if not budget_s >= 0 or budget_s == math.inf:   # nan or inf would never end the rounds
        raise ValueError(f"time_budget: {budget_s!r} is not a finite number of seconds >= 0")
    timer = _timer(dev)
    times: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        for _ in range(warmup):
            fn()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    t0, rounds = time.perf_counter(), 0
    while True:
        n = len(fns)
        for k in range(n):
            i = (rounds + k) % n
            times[i].append(timer(fns[i]))
        rounds += 1
        elapsed = time.perf_counter() - t0
        tight = rounds >= min_rounds and all(summarize(t).spread <= target_spread for t in times)
        done = tight or (rounds >= min_rounds and elapsed >= budget_s) or rounds >= MAX_ROUNDS
        left = 0.0 if done else max((min_rounds - rounds) * elapsed / rounds, budget_s - elapsed, 0.0)
        summary = [summarize(t) for t in times]
        if on_round is not None:
            on_round(Progress(rounds, elapsed, left, summary))
        if done or (stop is not None and stop.is_set()):
            return summary


def time_fn(fn: Callable[[], object], dev: torch.device, budget_s: float = 0.3) -> Timing:
    """One function alone: interleaved() with a single series, in its own timing session."""
    with timing_session(dev):
        return interleaved([fn], dev, budget_s)[0]
