"""Measured sweep columns, on demand: forward latency and the validation loss of a short training run.

Latency: every valid point's model is built, then all are timed together in interleaved rounds with an adaptive
stop (engine.measure.rounds, as the Latency page times), so load from another process hits every point alike;
median and IQR per point, a point whose IQR exceeds a quarter of its median is flagged noisy. Loss: each point
trains with the same seed, data and token budget (steps x batch x seq) through engine.train.loop.train, so every
run lands in the run store like any other and shows on the Training page. Before anything runs,
estimate_duration gives a range from closed-form FLOPs (engine.measure.estimate); while it runs, the time left
comes from the measured rates.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from engine.budget.params import count_params
from engine.config import ConfigError
from engine.guard import MemoryRefusal, check_fits
from engine.job_queue import QueuedJob, Ticket
from engine.measure.estimate import BUILD_S_PER_PARAM, DurationEstimate, call_seconds
from engine.measure.latency import prepare
from engine.measure.rounds import MIN_ROUNDS, NOISY_SPREAD, interleaved, timing_session
from engine.runtime import resolve_device
from engine.sweep.table import Metric, Sweep
from engine.train.data import load_data
from engine.train.loop import TrainConfig, model_for, train
from engine.validation import choice_problem, int_problem, number_problem

MEASURES = ("latency", "loss")
MEASURED: dict[str, Metric] = {
    "latency_ms": Metric("forward latency", "ms", "median over interleaved rounds, every point in every round"),
    "latency_iqr_ms": Metric("latency IQR", "ms", "interquartile range of the rounds"),
    "val_loss": Metric("val loss after a short run", "nats", "mean cross-entropy on held-out batches after the "
                                                             "last step; same seed, data and tokens per point"),
}


@dataclass(frozen=True)
class MeasureSettings:
    what: tuple[str, ...] = ("latency",)
    batch: int = 1                 # latency: one forward of batch x seq random tokens
    seq: int = 64
    budget_s: float = 5.0          # latency: time budget of the rounds (they stop earlier once every point is tight)
    steps: int = 100               # loss: training steps per point (TrainConfig's batch, seq, lr and seed)
    data: str = "names"
    device: str = "auto"
    dtype: str = "fp32"

    def __post_init__(self) -> None:
        problems = [choice_problem("measure", w, MEASURES) for w in self.what]
        if not self.what:
            problems.append(f"measure: name at least one of {', '.join(MEASURES)}")
        problems += [int_problem(n, getattr(self, n)) for n in ("batch", "seq", "steps")]
        problems.append(number_problem("budget_s", self.budget_s, strict=True))
        if found := [p for p in problems if p]:
            raise ConfigError(found)

    def train_config(self) -> TrainConfig:
        return TrainConfig(steps=self.steps, data=self.data, eval_every=max(1, self.steps // 4), samples=0)


@dataclass(frozen=True)
class Progress:
    fraction: float                # of the whole measurement, by time
    what: str
    elapsed_s: float
    seconds_left: float


@dataclass
class MeasuredSweep:
    sweep: Sweep
    values: list[dict] = field(default_factory=list)        # per point: measured key -> value (+ run_id)
    problems: list[list[str]] = field(default_factory=list)  # per point: why a measurement is missing or noisy
    stopped: bool = False

    def rows(self) -> list[dict]:
        return [{**row, **{k: vals.get(k) for k in MEASURED}, "run_id": vals.get("run_id"),
                 "problems": row["problems"] + probs}
                for row, vals, probs in zip(self.sweep.rows(), self.values, self.problems)]


def _phases(sweep: Sweep, ms: MeasureSettings) -> dict[str, tuple[float, float]]:
    """Per phase, (low, high) seconds before anything runs."""
    dev = resolve_device(ms.device)
    points = [p.config for p in sweep.points if p.valid]
    out = {}
    if "latency" in ms.what:
        build = sum(BUILD_S_PER_PARAM.get(dev.type, 2e-8) * count_params(c).total for c in points)
        r = sum(call_seconds(c, ms.batch, ms.seq, "forward", ms.dtype, dev) for c in points)
        out["latency"] = (build + (1 + MIN_ROUNDS) * r, build + r + max(MIN_ROUNDS * r, ms.budget_s + r))
    if "loss" in ms.what:
        tc = ms.train_config()
        steps = sum(tc.steps * call_seconds(c.replace(vocab_size=64, context_length=tc.seq), tc.batch, tc.seq,
                                            "train", "fp32", dev) for c in points)
        out["loss"] = (steps, steps)
    return out


def estimate_duration(sweep: Sweep, ms: MeasureSettings) -> DurationEstimate:
    """How long the measurement should take, from closed-form FLOPs at the device's measured peak."""
    phases = _phases(sweep, ms)
    low, high = sum(lo for lo, _ in phases.values()), sum(hi for _, hi in phases.values())
    return DurationEstimate(low, high, 0.0, f"{sum(p.valid for p in sweep.points)} points: "
                            + ", ".join(f"{k} {lo:,.1f}-{hi:,.1f} s" for k, (lo, hi) in phases.items())
                            + " (closed-form FLOPs at the fraction of the measured peak small models reach)")


class _Clock:
    """Seconds left: the current phase's own live figure, plus the estimate of the phases not yet started."""

    def __init__(self, phases: dict[str, tuple[float, float]]):
        self.guess = {k: hi for k, (_, hi) in phases.items()}
        self.left, self.start = dict(self.guess), time.perf_counter()

    def progress(self, phase: str, left_s: float, what: str) -> Progress:
        self.left[phase] = max(0.0, left_s)
        elapsed = time.perf_counter() - self.start
        left = sum(self.left.values())
        return Progress(elapsed / (elapsed + left) if elapsed + left > 0 else 1.0, what, elapsed, left)


def measure_sweep(sweep: Sweep, ms: MeasureSettings, store=None, on_progress: Callable[[Progress], None] | None = None,
                  stop: threading.Event | None = None) -> MeasuredSweep:
    """Latency and/or val loss of every valid point; a point that cannot be measured (refused as too big for
    free memory, stopped) keeps its closed-form row and says why. `stop` ends the work after the current round
    or training step."""
    out = MeasuredSweep(sweep, [{} for _ in sweep.points], [[] for _ in sweep.points])
    stop = stop or threading.Event()
    clock = _Clock(_phases(sweep, ms))
    report = on_progress or (lambda p: None)
    valid = [i for i, p in enumerate(sweep.points) if p.valid]
    if "latency" in ms.what:
        _latency(sweep, ms, valid, out, clock, report, stop)
    if "loss" in ms.what:
        _loss(sweep, ms, valid, out, clock, report, stop, store)
    out.stopped = stop.is_set()
    return out


def _forward(model, batch: int, seq: int, seed: int) -> Callable[[], object]:
    x = torch.randint(model.cfg.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(seed))
    x = x.to(next(model.parameters()).device)

    def fn():
        with torch.no_grad():
            return model(x)
    return fn


def _latency(sweep, ms, valid, out, clock, report, stop) -> None:
    dev = resolve_device(ms.device)
    with timing_session(dev):
        fns = {}
        for i in valid:
            try:
                model = prepare(sweep.points[i].config, ms.batch, ms.seq, ms.dtype, ms.device)[0]
            except (ValueError, MemoryRefusal) as e:
                out.problems[i].append(f"latency: {e}")
                continue
            fns[i] = _forward(model, ms.batch, ms.seq, seed=i)
            report(clock.progress("latency", clock.guess["latency"], f"building {sweep.points[i].label}"))
        if not fns or stop.is_set():
            return
        timings = interleaved(list(fns.values()), dev, ms.budget_s, stop=stop, on_round=lambda p: report(
            clock.progress("latency", p.left_s, f"latency round {p.rounds}")))
    for i, t in zip(fns, timings):
        out.values[i].update(latency_ms=t.median_s * 1e3, latency_iqr_ms=t.iqr_s * 1e3)
        if t.spread > NOISY_SPREAD:
            out.problems[i].append(f"latency: noisy (IQR {t.spread:.0%} of the median over {t.runs} rounds)")
    clock.progress("latency", 0.0, "latency done")


def _loss(sweep, ms, valid, out, clock, report, stop, store) -> None:
    tc = ms.train_config()
    data = load_data(ms.data, seed=tc.seed)
    device = str(resolve_device(ms.device))
    for n, i in enumerate(valid):
        if stop.is_set():
            out.problems[i].append("loss: stopped before this point trained")
            continue
        cfg = sweep.points[i].config
        try:
            check_fits(model_for(cfg, data, tc), device, tc.batch, tc.seq, "fp32", training=True)
        except MemoryRefusal as e:
            out.problems[i].append(f"loss: {e}")
            continue
        t0, left_after = time.perf_counter(), len(valid) - n - 1

        def on_step(rec, label=sweep.points[i].label, t0=t0, left_after=left_after) -> None:
            per_step = (time.perf_counter() - t0) / rec.step
            report(clock.progress("loss", per_step * ((tc.steps - rec.step) + left_after * tc.steps),
                                  f"training {label}: step {rec.step}/{tc.steps}"))

        r = train(cfg, tc, data, device=device, on_step=on_step, stop=stop, store=store)
        out.values[i]["run_id"] = r.run_id
        if r.status == "finished":
            out.values[i]["val_loss"] = r.final_loss
        else:
            out.problems[i].append(f"loss: run {r.run_id} {r.status}: {r.message}")


class SweepJob(QueuedJob):
    """measure_sweep in a daemon thread, so a page stays responsive while it polls `progress`."""

    def __init__(self, sweep: Sweep, ms: MeasureSettings, store=None, ticket: Ticket | None = None):
        self.sweep, self.ms, self.store = sweep, ms, store
        self.progress: Progress | None = None
        self.result: MeasuredSweep | None = None
        self.error: str | None = None
        self.ticket = ticket   # a place in the server's job queue (engine.job_queue), or None: start at once
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="explorer-sweep")

    def start(self) -> "SweepJob":
        self._thread.start()
        return self

    def _run(self) -> None:
        with self.turn() as go:
            if not go:
                return
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
