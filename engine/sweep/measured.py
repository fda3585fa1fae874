"""Measured sweep columns, on demand: forward latency and the validation loss of a short training run.

Latency: every point's model is built first, then timed in rounds, each round visiting the points in the
opposite order of the last (drift of a shared machine falls on all points alike); the median of the round
medians is reported with the spread (max - min) of the rounds beside it. Loss: each point trains with the same
seed, data and token budget (steps x batch x seq) through engine.train.loop.train, so every run lands in the run
store like any other and shows on the Training page. Before anything runs, estimate_seconds gives a lower bound
from the closed-form FLOPs at the device's peak; during the run, the time left comes from the measured rates.
"""
from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from engine.budget.flops import flops_budget
from engine.config import ConfigError
from engine.guard import MemoryRefusal
from engine.measure.latency import device_profile, measure, peak_flops, prepare
from engine.runtime import resolve_device
from engine.sweep.table import Metric, Sweep
from engine.train.data import load_data
from engine.train.loop import TrainConfig, model_for, train

MEASURES = ("latency", "loss")
MEASURED: dict[str, Metric] = {
    "latency_ms": Metric("forward latency", "ms", "median of the round medians, points timed in interleaved rounds"),
    "latency_spread_ms": Metric("latency spread", "ms", "max - min of the round medians"),
    "val_loss": Metric("val loss after a short run", "nats", "mean cross-entropy on held-out batches after the "
                                                             "last step; same seed, data and tokens per point"),
}


@dataclass(frozen=True)
class MeasureSettings:
    what: tuple[str, ...] = ("latency",)
    batch: int = 1                 # latency: one forward of batch x seq random tokens
    seq: int = 64
    rounds: int = 3
    min_run_time: float = 0.1      # seconds of timing per point per round
    steps: int = 100               # loss: training steps per point (TrainConfig's batch, seq, lr and seed)
    data: str = "names"
    device: str = "auto"
    dtype: str = "fp32"

    def __post_init__(self) -> None:
        problems = [f"measure: {w!r} is not one of {', '.join(MEASURES)}" for w in self.what if w not in MEASURES]
        if not self.what:
            problems.append(f"measure: name at least one of {', '.join(MEASURES)}")
        for name in ("batch", "seq", "rounds", "steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                problems.append(f"{name}: {v!r} is not an integer >= 1")
        if problems:
            raise ConfigError(problems)

    def train_config(self) -> TrainConfig:
        return TrainConfig(steps=self.steps, data=self.data, eval_every=max(1, self.steps // 4), samples=0)


@dataclass(frozen=True)
class Progress:
    done: int                      # work units: one per point per latency round, one per training step
    total: int
    what: str
    elapsed_s: float
    seconds_left: float


@dataclass
class MeasuredSweep:
    sweep: Sweep
    values: list[dict] = field(default_factory=list)        # per point: measured key -> value (+ run_id)
    problems: list[list[str]] = field(default_factory=list)  # per point: why a measurement is missing
    stopped: bool = False

    def rows(self) -> list[dict]:
        out = []
        for row, vals, probs in zip(self.sweep.rows(), self.values, self.problems):
            out.append({**row, **{k: vals.get(k) for k in MEASURED}, "run_id": vals.get("run_id"),
                        "problems": row["problems"] + probs})
        return out


def _forward_flops(cfg, batch: int, seq: int) -> int:
    return flops_budget(cfg, batch, seq).forward_flops


def estimate_seconds(sweep: Sweep, ms: MeasureSettings) -> float:
    """A lower bound before anything runs: closed-form FLOPs of every timed call and training step at the
    device's matmul peak (small models reach a fraction of it: the live estimate replaces this)."""
    dev = resolve_device(ms.device)
    peak = peak_flops(device_profile(dev), ms.dtype) or 1e11
    tc = ms.train_config()
    total = 0.0
    for p in sweep.points:
        if not p.valid:
            continue
        if "latency" in ms.what:
            total += ms.rounds * ms.min_run_time
        if "loss" in ms.what:
            total += 3 * _forward_flops(p.config.replace(vocab_size=32, context_length=tc.seq), tc.batch,
                                        tc.seq) * tc.steps / peak
    return total


class _Clock:
    """Units done and seconds spent per phase; the time left uses each phase's own rate once it has one."""

    def __init__(self, units: dict[str, int], guess: dict[str, float]):
        self.units, self.rate, self.done = units, dict(guess), dict.fromkeys(units, 0)
        self.spent, self.start = dict.fromkeys(units, 0.0), time.perf_counter()

    def tick(self, phase: str, seconds: float) -> None:
        self.done[phase] += 1
        self.spent[phase] += seconds
        self.rate[phase] = self.spent[phase] / self.done[phase]

    def progress(self, what: str) -> Progress:
        left = sum((self.units[k] - self.done[k]) * self.rate[k] for k in self.units)
        return Progress(sum(self.done.values()), sum(self.units.values()), what,
                        time.perf_counter() - self.start, left)


def measure_sweep(sweep: Sweep, ms: MeasureSettings, store=None, on_progress: Callable[[Progress], None] | None = None,
                  stop: threading.Event | None = None) -> MeasuredSweep:
    """Latency and/or val loss of every valid point; a point that cannot be measured (refused as too big for
    free memory, stopped) keeps its closed-form row and says why. `stop` ends the work after the current step."""
    out = MeasuredSweep(sweep, [{} for _ in sweep.points], [[] for _ in sweep.points])
    stop = stop or threading.Event()
    valid = [i for i, p in enumerate(sweep.points) if p.valid]
    tc = ms.train_config()
    units = {"latency": ms.rounds * len(valid) if "latency" in ms.what else 0,
             "loss": tc.steps * len(valid) if "loss" in ms.what else 0}
    est = estimate_seconds(sweep, ms)
    clock = _Clock(units, {k: est / max(1, sum(units.values())) for k in units})
    report = on_progress or (lambda p: None)
    if "latency" in ms.what:
        _latency(sweep, ms, valid, out, clock, report, stop)
    if "loss" in ms.what:
        _loss(sweep, tc, ms, valid, out, clock, report, stop, store)
    out.stopped = stop.is_set()
    return out


def _latency(sweep, ms, valid, out, clock, report, stop) -> None:
    models = {}
    for i in valid:
        try:
            models[i] = prepare(sweep.points[i].config, ms.batch, ms.seq, ms.dtype, ms.device)[0]
        except (ValueError, MemoryRefusal) as e:
            out.problems[i].append(f"latency: {e}")
    rounds: dict[int, list[float]] = {i: [] for i in models}
    order = list(models)
    for r in range(ms.rounds):
        for i in order if r % 2 == 0 else order[::-1]:
            if stop.is_set():
                break
            t0 = time.perf_counter()
            rounds[i].append(measure(models[i], ms.batch, ms.seq, "forward", ms.min_run_time).median_ms)
            clock.tick("latency", time.perf_counter() - t0)
            report(clock.progress(f"latency round {r + 1}/{ms.rounds}: {sweep.points[i].label}"))
    for i, times in rounds.items():
        if times:
            out.values[i].update(latency_ms=statistics.median(times), latency_spread_ms=max(times) - min(times))
        if len(times) < ms.rounds:
            out.problems[i].append(f"latency: stopped after {len(times)} of {ms.rounds} rounds"
                                   if times else "latency: stopped before it was timed")


def _loss(sweep, tc, ms, valid, out, clock, report, stop, store) -> None:
    data = load_data(ms.data, seed=tc.seed)
    device = str(resolve_device(ms.device))
    for i in valid:
        if stop.is_set():
            out.problems[i].append("loss: stopped before this point trained")
            continue
        cfg = sweep.points[i].config
        try:
            from engine.guard import check_fits
            check_fits(model_for(cfg, data, tc), device, tc.batch, tc.seq, "fp32", training=True)
        except MemoryRefusal as e:
            out.problems[i].append(f"loss: {e}")
            continue
        last = [time.perf_counter()]

        def on_step(rec, label=sweep.points[i].label) -> None:
            now = time.perf_counter()
            clock.tick("loss", now - last[0])
            last[0] = now
            report(clock.progress(f"training {label}: step {rec.step}/{tc.steps}"))

        r = train(cfg, tc, data, device=device, on_step=on_step, stop=stop, store=store)
        out.values[i]["run_id"] = r.run_id
        if r.status == "finished":
            out.values[i]["val_loss"] = r.final_loss
        else:
            out.problems[i].append(f"loss: run {r.run_id} {r.status}: {r.message}")


class SweepJob:
    """measure_sweep in a daemon thread, so a page stays responsive while it polls `progress`."""

    def __init__(self, sweep: Sweep, ms: MeasureSettings, store=None):
        self.sweep, self.ms, self.store = sweep, ms, store
        self.estimate_s = estimate_seconds(sweep, ms)
        self.progress: Progress | None = None
        self.result: MeasuredSweep | None = None
        self.error: str | None = None
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="explorer-sweep")

    def start(self) -> "SweepJob":
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.result = measure_sweep(self.sweep, self.ms, self.store, self._on_progress, self.stop)
        except Exception as e:  # noqa: BLE001 -- shown on the page; a thread has nobody else to raise to
            self.error = f"{type(e).__name__}: {e}"

    def _on_progress(self, p: Progress) -> None:
        self.progress = p

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()
