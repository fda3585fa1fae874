"""Interleaved rounds, the adaptive stop, noisy flags in the table and on the charts, and the duration estimate
held against a real sweep."""
from __future__ import annotations

import itertools
import time

import pytest
import torch

import engine.measure.rounds as rounds
from app import latency_view
from app.charts import latency as latency_charts
from engine.config import ModelConfig
from engine.measure import latency as lat
from engine.measure import probe
from engine.measure.decode import DecodePoint
from engine.measure.estimate import budget_note, call_seconds, sweep_estimate
from engine.measure.rounds import Timing, interleaved
from engine.model import build_model

CPU = torch.device("cpu")
TINY = ModelConfig(name="tiny", vocab_size=64, context_length=64, d_model=32, n_layers=2, n_heads=4)
SWEEP = TINY.replace(d_model=192, n_layers=2, vocab_size=1024, context_length=256)   # the estimate tests' sweep
BATCHES, SEQS = [1, 4], [64, 256]


def scripted(monkeypatch, durations):
    """Every timed call reports the next of `durations` (seconds) instead of the wall clock."""
    it = iter(durations)

    def timer(dev):
        def run(fn):
            fn()
            return next(it)
        return run
    monkeypatch.setattr(rounds, "_timer", timer)


def test_rounds_interleave_and_rotate_the_first_call():
    log = []
    fns = [lambda k=k: log.append(k) for k in "abc"]
    out = interleaved(fns, CPU, budget_s=0.0, min_rounds=3)
    assert log == list("abc") + list("abc" "bca" "cab")          # warm-up, then each round starts one later
    assert [t.runs for t in out] == [3, 3, 3]


def test_stops_once_every_spread_is_small(monkeypatch):
    scripted(monkeypatch, itertools.repeat(0.010))
    seen = []
    out = interleaved([lambda: None] * 2, CPU, budget_s=3600, on_round=seen.append)
    assert [t.runs for t in out] == [rounds.MIN_ROUNDS] * 2 and out[0].median_s == 0.010 and out[0].iqr_s == 0
    assert [p.rounds for p in seen] == list(range(1, rounds.MIN_ROUNDS + 1)) and seen[-1].left_s == 0


def test_a_wide_spread_keeps_measuring_until_the_budget(monkeypatch):
    scripted(monkeypatch, itertools.cycle([0.010, 0.030]))        # never tight
    out = interleaved([lambda: None], CPU, budget_s=3600)
    assert out[0].runs == rounds.MAX_ROUNDS and out[0].noisy       # only the round cap ends it
    scripted(monkeypatch, itertools.cycle([0.010, 0.030]))
    assert interleaved([lambda: None], CPU, budget_s=0.0)[0].runs == rounds.MIN_ROUNDS   # budget spent


def test_noisy_threshold():
    assert Timing(1.0, 0.30, 5).noisy and not Timing(1.0, 0.25, 5).noisy
    assert Timing(1.0, 0.30, 5).spread == 0.30


def result(seq: int, ms: float, iqr: float) -> lat.LatencyResult:
    return lat.LatencyResult("t", "forward", "cpu", "fp32", 1, seq, ms, iqr, 5, seq / ms * 1e3, 1e6,
                             1e6 / ms * 1e3 / 1e12, None, "CPU (measured)", None, 1e3)


def test_noisy_points_are_flagged_in_the_table_and_on_the_charts():
    rs = [result(16, 1.0, 0.1), result(64, 2.0, 1.0)]             # IQR 10% and 50% of the median
    assert [r.noisy for r in rs] == [False, True]
    rows = latency_view.sweep_rows(TINY, rs)
    assert [r["IQR / median"] for r in rows] == ["10%", "noisy (50%)"]
    assert [r["MFU"] for r in rows] == ["peak estimate is wrong"] * 2      # 1 kFLOP/s peak: impossible MFU
    caption = latency_view.sweep_caption(TINY, rs, on_gpu=False)
    assert "peak estimate is wrong" in caption and "✕" in caption and "25%" in caption
    for fig in (latency_charts.latency_figure(rs), latency_charts.throughput_figure(rs)):
        assert list(fig.data[0].marker.symbol) == ["circle", "x"]
        assert fig.data[-1].name == latency_charts.NOISY_LEGEND
    quiet = latency_charts.latency_figure(rs[:1])
    assert [t.name for t in quiet.data] == ["batch 1"]                # no legend entry when nothing is noisy
    pts = {"MHA": [DecodePoint(16, 1.0, 0.6, 1e3, 1)], "MQA": [DecodePoint(16, 1.0, 0.1, 1e3, 1)]}
    fig = latency_charts.decode_figure(pts)
    assert list(fig.data[0].marker.symbol) == ["x"] and list(fig.data[1].marker.symbol) == ["circle"]
    assert "MHA 1.000 ms/token (IQR 0.600 ms, noisy)" in latency_view.decode_caption(pts)


def test_progress_text_counts_down():
    p = rounds.Progress(3, 4.0, 12.4, [])
    assert latency_view.progress_text(p, "Sweep") == "Sweep: round 3, 4.0 s timed, at most 12 s left"
    assert latency_view.progress_share(p) == pytest.approx(4.0 / 16.4)
    curves = {"MHA": [DecodePoint(16, 1.0, 0.1, 1e3, 1)], "MQA": [DecodePoint(16, 0.5, 0.1, 2e3, 1)]}
    assert latency_view.decode_progress_text(1, 4, curves, 6.0) == \
        "context 16 done (1/4): MHA 1.000 ms, MQA 0.500 ms; about 18 s left"


class VirtualClock:
    """A clock that only moves when a timed call says so: the rounds loop's budget and timings read it."""
    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.mark.parametrize("budget_rounds, settles", [(0, True), (0, False), (20, False), (300, False)])
def test_sweep_estimate_has_the_rounds_the_sweep_runs(monkeypatch, budget_rounds, settles):
    """The estimate's structure against the real sweep loop, on a virtual clock where each call costs exactly
    the estimate's call_seconds: a warm-up round, then MIN_ROUNDS rounds when every point settles (low_s), or
    rounds until the budget is spent when none does (at most high_s; a budget of 300 rounds meets MAX_ROUNDS).
    Wall time is not involved, so load on the machine cannot move it."""
    cfg, batches, seqs = SWEEP, BATCHES, SEQS
    clock = VirtualClock()
    monkeypatch.setattr(rounds, "time", clock)
    cost = {(b, s): call_seconds(cfg, b, s, "forward", "fp32", CPU) for b in batches for s in seqs}

    def step_fn(model, x, mode):
        def call():
            clock.now += cost[tuple(x.shape)]
        return call
    monkeypatch.setattr(lat, "_step_fn", step_fn)
    round_s = sum(cost.values())
    budget = max(0.0, budget_rounds - 0.5) * round_s       # half a round off the edge: no float tie
    est = sweep_estimate(cfg, batches, seqs, "forward", "fp32", CPU, budget)
    build = est.low_s - (1 + rounds.MIN_ROUNDS) * round_s
    assert est.round_s == pytest.approx(round_s, rel=1e-12)
    lat.latency_sweep(cfg, batches, seqs, "fp32", "cpu", "forward", budget,
                      target_spread=rounds.TARGET_SPREAD if settles else -1.0)   # -1: no spread is that tight
    timed = clock.now
    if settles:
        assert timed == pytest.approx(est.low_s - build, rel=1e-9)
    else:
        expected = (1 + min(max(rounds.MIN_ROUNDS, budget_rounds), rounds.MAX_ROUNDS)) * round_s
        assert timed == pytest.approx(expected, rel=1e-9)
        assert timed <= est.high_s - build + 1e-12


def test_sweep_estimate_orders_the_points_as_the_real_sweep_does(monkeypatch):
    """The per-call model (closed-form FLOPs over the probed peak, plus a cost per layer call) against real
    timings, as ratios: each point's time over the smallest point's, estimated and measured in the same
    interleaved rounds, within 4x. Load on the machine slows every point of a round alike, so it mostly cancels;
    what is left is a fixed delay per call (being scheduled back in), which squeezes the ratios of the smallest
    points: a run beside a mutation run measured (4, 64) at 0.33 of its estimated ratio. The absolute estimate
    against the wall clock is benchmarked (bench/bench_latency_sweep.py), not asserted."""
    monkeypatch.setattr(probe, "_CACHE", {})
    cfg, batches, seqs = SWEEP, BATCHES, SEQS
    est = {(b, s): call_seconds(cfg, b, s, "forward", "fp32", CPU) for b in batches for s in seqs}
    real = {(r.batch, r.seq): r.median_ms for r in
            lat.latency_sweep(cfg, batches, seqs, "fp32", "cpu", "forward", 1.0)}
    small = (1, 64)
    for point in est:
        ratio = (real[point] / real[small]) / (est[point] / est[small])
        assert 0.25 <= ratio <= 4, (point, est, real)


def test_device_text_says_how_many_threads_time(monkeypatch):
    import os
    monkeypatch.setattr(os, "getloadavg", lambda: (50.0, 50.0, 50.0))
    assert f"now 1 of {torch.get_num_threads()}" in latency_view.device_text(CPU)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert f"now {torch.get_num_threads()} of {torch.get_num_threads()}" in latency_view.device_text(CPU)


def test_a_budget_shorter_than_the_fewest_rounds_is_explained():
    """Rounds stop once the budget is spent but never before MIN_ROUNDS: a 5 s budget over rounds of ~6 s still
    takes ~35 s, and the estimate says why instead of contradicting the budget silently."""
    cfg = SWEEP
    est = sweep_estimate(cfg, BATCHES, SEQS, "forward", "fp32", CPU, 0.5 * fewest_rounds_s(cfg))
    assert est.note.startswith(f"{rounds.MIN_ROUNDS} rounds of ≈ ") and "cannot end it sooner" in est.note
    assert est.low_s >= rounds.MIN_ROUNDS * est.round_s                # what the rounds really take
    assert sweep_estimate(cfg, BATCHES, SEQS, "forward", "fp32", CPU, 10 * fewest_rounds_s(cfg)).note == ""
    assert budget_note(1.0, 5.0) == "" and budget_note(1.01, 5.0).startswith("5 rounds of ≈ 1.0 s")


def fewest_rounds_s(cfg) -> float:
    return sweep_estimate(cfg, BATCHES, SEQS, "forward", "fp32", CPU, 0.0).round_s * rounds.MIN_ROUNDS


def test_the_budgets_measure_estimate_within_3x_of_the_cpu_time_it_takes(monkeypatch):
    """Against the real probe: the Budgets page's Measure on a small gpt2 (FLOP count on meta, two real builds
    and forwards), estimated for an idle machine and held against the CPU seconds this process spends on it.
    CPU time, not the wall clock: other processes on the cores stretch the wall clock (the estimate scales for
    the load it sees when asked, which can change before the run ends) but hardly this process's own work.
    A model is built first so the process's one-time import is on neither side."""
    import os

    from app.budget_measure import measure_budgets, measure_plan
    from engine.measure.estimate import measure_estimate
    from engine.presets import PRESETS
    monkeypatch.setattr(probe, "_CACHE", {})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    build_model(TINY)
    cfg = PRESETS["gpt2"].config.replace(n_layers=2)
    plan = measure_plan(cfg, 1, 256, "cpu")
    est = measure_estimate(cfg, plan.flops_at, plan.built_at, "fp32", CPU)
    t = time.process_time()
    measure_budgets(cfg, 1, 256, "fp32", "sdpa", "cpu")
    real = time.process_time() - t
    assert est.low_s / 3 <= real <= 3 * est.high_s, (est, real)
