"""The timing statistics and noise flags against hand-computed cases, at several scales.

summarize() reports the median and the IQR from statistics.quantiles' default "exclusive" method: the p-quantile
of n sorted samples sits at position p * (n + 1), interpolated between neighbours. Each case below is worked by
hand from that rule, then scaled by powers of two from 2^-20 s (about a microsecond) to 2^10 s, which binary
floating point multiplies exactly: a rule that depends on the unit (an absolute threshold, a rounding to ms)
gives a different answer at some scale, the right rule the same answer at all of them."""
from __future__ import annotations

import itertools

import pytest
import torch

import engine.measure.rounds as rounds
from engine.measure.decode import DecodePoint
from engine.measure.latency import LatencyResult
from engine.measure.rounds import NOISY_SPREAD, TARGET_SPREAD, Timing, interleaved, summarize

SCALES = [2.0 ** k for k in (-20, -10, 0, 10)]
CASES = [   # samples, median, IQR (worked by hand), noisy
    # n=5: q1 at position 1.5 (between 4 and 4), q3 at 4.5 (between 6 and 6)
    ([4, 4, 5, 6, 6], 5, 2, True),
    # n=6: q1 at 1.75 -> 8 + 0.75 * (9 - 8) = 8.75; q3 at 5.25 -> 11 + 0.25 * (12 - 11) = 11.25; median (10 + 10) / 2
    ([12, 8, 10, 11, 9, 10], 10, 2.5, False),                     # spread exactly 0.25: not over the threshold
    ([12.5, 8, 10, 11, 9, 10], 10, 2.625, True),                  # q3 11 + 0.25 * 1.5: spread 0.2625
    # n=5 with one hiccup: q3 at 4.5 -> 13 + 0.5 * (30 - 13) = 21.5; the median ignores it
    ([10, 11, 12, 13, 30], 12, 11, True),
    # n=8, one slow call: q1 at 2.25 and q3 at 6.75 both among the 1s
    ([1, 1, 1, 1, 1, 1, 1, 2], 1, 0, False),
    # n=2: positions 0.75 and 2.25 lie outside the data, and the exclusive method extends the line through the
    # two points: q1 = 1 - 0.25 * 2 = 0.5, q3 = 3 + 0.25 * 2 = 3.5
    ([3, 1], 2, 3, True),
    ([7], 7, 0, False),                                           # one sample: its value, no spread
]


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("samples, median, iqr, noisy", CASES)
def test_summary_and_noise_flag_by_hand(samples, median, iqr, noisy, scale):
    t = summarize([x * scale for x in samples])
    assert (t.median_s, t.iqr_s, t.runs) == (median * scale, iqr * scale, len(samples))
    assert t.spread == iqr / median and t.noisy is noisy


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("samples, median, iqr, noisy", CASES)
def test_the_tables_and_the_sweep_flag_the_same_series(samples, median, iqr, noisy, scale):
    """The Latency page's rows (ms), the decode curves (ms/token) and Timing (s) agree on what is noisy."""
    t = summarize([x * scale for x in samples])
    ms, iqr_ms = t.median_s * 1e3, t.iqr_s * 1e3
    row = LatencyResult("t", "forward", "cpu", "fp32", 1, 16, ms, iqr_ms, t.runs, 1.0, 1.0, 1.0, None, None, None)
    assert row.noisy is noisy and row.spread == pytest.approx(iqr / median)
    assert DecodePoint(16, ms, iqr_ms, 1.0, 0).noisy is noisy


def series(*durations):
    """Timed functions that each report their own next duration (seconds) instead of the wall clock."""
    return [lambda it=itertools.cycle(d): next(it) for d in durations]


@pytest.mark.parametrize("scale", SCALES)
def test_the_adaptive_stop_reads_the_relative_spread_at_every_scale(monkeypatch, scale):
    cpu = torch.device("cpu")
    monkeypatch.setattr(rounds, "_timer", lambda dev: lambda fn: fn())
    # after the warm-up call, 1.04, 1.00, 1.04, 1.00, 1.04: sorted 1, 1, 1.04, 1.04, 1.04 -> q1 at 1.5: 1,
    # q3 at 4.5: 1.04, median 1.04: spread 0.04 / 1.04 = 0.038 <= TARGET_SPREAD, so it stops after MIN_ROUNDS
    out = interleaved(series([1.00 * scale, 1.04 * scale]), cpu, budget_s=3600)[0]
    assert out.runs == rounds.MIN_ROUNDS and out.median_s == 1.04 * scale and out.spread == pytest.approx(0.04 / 1.04)
    # 1.00 / 1.06: 100 of each over the 200-round cap; median (1.00 + 1.06) / 2 = 1.03, q1 1.00, q3 1.06:
    # spread 0.058 > TARGET_SPREAD never tightens, so only the cap ends it; far from noisy
    out = interleaved(series([1.00 * scale, 1.06 * scale]), cpu, budget_s=3600)[0]
    assert out.runs == rounds.MAX_ROUNDS and out.median_s == pytest.approx(1.03 * scale) and not out.noisy
    assert out.spread == pytest.approx(0.06 / 1.03)
    # two series, one tight and one wide: the stop waits for the wide one, and only it is noisy (IQR 0.6 / 1.3)
    tight, wide = interleaved(series([1.0 * scale], [1.0 * scale, 1.6 * scale]), cpu, budget_s=3600)
    assert tight.runs == wide.runs == rounds.MAX_ROUNDS and not tight.noisy and wide.noisy
    assert 0.04 / 1.04 < TARGET_SPREAD < 0.06 / 1.03 and NOISY_SPREAD == 0.25     # the thresholds these straddle
