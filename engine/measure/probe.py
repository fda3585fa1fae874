"""This machine's peak FLOP/s per dtype and its memory bandwidth, measured rather than assumed.

Peak: square matmuls of growing size (CPU 128 to 1,024, GPU 1,024 to 8,192, while one call stays under
50 ms), each repeated for a few tens of ms; the best rate seen. A busy machine only makes a probe slower, never faster, so the best
of all probes is the closest to the hardware's peak: the result is kept per process and in
$EXPLORER_HOME/peaks.json (per machine, thread count and torch version) and only ever raised, also by
`raise_peak` when a measured model ran faster than the probe did. Bandwidth: the best of a few 64 MiB copies
(read + write). One probe costs about a second; later processes read the file.
"""
from __future__ import annotations

import functools
import json
import math
import os
import platform
import time
from pathlib import Path

import torch

from engine.measure.rounds import LOCK
from engine.runtime import TORCH_DTYPES

SIZES = {"cpu": (128, 256, 512, 1024), "cuda": (1024, 2048, 4096, 8192)}   # a GPU needs big ones to reach its peak
SLOW_CALL_S = 0.05        # stop growing the matmul once one call takes this long
PER_SIZE_S = 0.04         # repeat each size for about this long (at least twice)
_CACHE: dict[str, dict] = {}    # machine key -> {"peak": {dtype: FLOP/s}, "bandwidth": bytes/s}


def store_path() -> Path:
    return Path(os.environ.get("EXPLORER_HOME") or Path.home() / ".explorer") / "peaks.json"


def machine_key(device: torch.device, threads: int | None = None) -> str:
    """What a stored peak belongs to: the processor (or GPU name), the threads used (default: torch's current
    count) and torch's version."""
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}|torch {torch.__version__}"
    return f"cpu:{_cpu_name()}|{threads or torch.get_num_threads()} threads|torch {torch.__version__}"


@functools.cache
def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.partition(":")[2].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def probe_matmul(dtype: str, device: torch.device) -> float:
    """Best FLOP/s of n x n x n matmuls (2 n^3 FLOPs each) in `dtype` on `device`."""
    best = 0.0
    for n in SIZES.get(device.type, SIZES["cpu"]):
        a = torch.randn(n, n, device=device).to(TORCH_DTYPES[dtype])
        b = torch.randn(n, n, device=device).to(TORCH_DTYPES[dtype])
        a @ b                                    # warm-up: thread pool, kernel selection
        _sync(device)
        spent, calls, slowest = 0.0, 0, 0.0
        while calls < 2 or spent < PER_SIZE_S:
            t = time.perf_counter()
            a @ b
            _sync(device)
            dt = time.perf_counter() - t
            spent, calls, slowest = spent + dt, calls + 1, max(slowest, dt)
            best = max(best, 2 * n**3 / dt)
        if slowest > SLOW_CALL_S:
            break
    return best


def probe_bandwidth(device: torch.device) -> float:
    """Best bytes/s of copying 64 MiB (a read and a write per byte), over five copies."""
    src = torch.ones(16 * 2**20, device=device)
    dst = torch.empty_like(src)
    best = math.inf
    for _ in range(5):
        _sync(device)
        t = time.perf_counter()
        dst.copy_(src)
        _sync(device)
        best = min(best, time.perf_counter() - t)
    return 2 * src.numel() * src.element_size() / best


def _read_store() -> dict:
    try:
        return json.loads(store_path().read_text())
    except (OSError, ValueError):
        return {}


def _write_store(key: str, entry: dict) -> None:
    data = _read_store()
    data[key] = entry
    try:
        path = store_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass                                     # a read-only home only costs a re-probe next process


def _entry(device: str | torch.device, threads: int | None = None) -> tuple[str, dict]:
    """(machine key, {"peak": {dtype: FLOP/s}, "bandwidth": bytes/s}): this process's, else stored, else probed
    (under the timing lock, with `threads` intra-op threads on CPU)."""
    dev = torch.device(device)
    threads = threads or torch.get_num_threads()
    key = machine_key(dev, threads)
    if key not in _CACHE:
        entry = _read_store().get(key)
        try:
            entry = {"peak": {d: float(entry["peak"][d]) for d in TORCH_DTYPES}, "bandwidth": float(entry["bandwidth"])}
        except (TypeError, KeyError, ValueError):
            entry = _probe(dev, threads)
            _write_store(key, entry)
        _CACHE[key] = entry
    return key, _CACHE[key]


def _probe(dev: torch.device, threads: int) -> dict:
    """Probe with `threads` threads and, on CPU, with one: more threads are never slower on an idle machine, but
    on a busy one they wait for each other (two threads probed 0.07 GFLOP/s where one reached 100), so the best
    of both is the better lower bound of what `threads` threads can do."""
    counts = {threads, 1} if dev.type == "cpu" else {threads}
    with LOCK:
        before = torch.get_num_threads()
        try:
            runs = []
            for n in sorted(counts):
                torch.set_num_threads(n)
                runs.append({"peak": {d: probe_matmul(d, dev) for d in TORCH_DTYPES},
                             "bandwidth": probe_bandwidth(dev)})
        finally:
            torch.set_num_threads(before)
    return {"peak": {d: max(r["peak"][d] for r in runs) for d in TORCH_DTYPES},
            "bandwidth": max(r["bandwidth"] for r in runs)}


def machine_peaks(device: str | torch.device = "cpu", threads: int | None = None) -> dict[str, float]:
    """Peak FLOP/s per dtype ("fp32", "bf16", "fp16") of `device` with `threads` threads (default: torch's
    current count); the same dict object for the whole process."""
    return _entry(device, threads)[1]["peak"]


def machine_bandwidth(device: str | torch.device = "cpu", threads: int | None = None) -> float:
    """Memory bandwidth of `device` in bytes/s (best copy)."""
    return _entry(device, threads)[1]["bandwidth"]


def raise_peak(device: str | torch.device, dtype: str, achieved: float) -> bool:
    """A real model ran at `achieved` FLOP/s (with torch's current threads), above the probed peak: the probe ran
    on a busier machine. Keep the higher figure (in this process and on disk) so later readings use it. True
    when the peak was raised."""
    key, entry = _entry(device)
    if achieved <= entry["peak"].get(dtype, math.inf):
        return False
    entry["peak"][dtype] = achieved
    _write_store(key, entry)
    return True
