"""Benchmarks against peers: each `bench/bench_*.py` has a `main()` that prints its figures, the goal, and a
ratio against a peer measured in the same run (`python -m bench` runs them all; see bench/RESULTS.md)."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def median_seconds(fn: Callable[[], object], repeat: int, number: int = 1) -> float:
    """Median over `repeat` timings of `number` back-to-back calls, per call (robust to a busy machine)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)
