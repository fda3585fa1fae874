"""How long a latency sweep or a decode comparison will take, before it starts: closed-form FLOPs over the
device's peak (catalogue or probe), plus a fixed cost per layer call, plus building the model.

  one call     t = FLOPs / (EFFICIENCY * peak / busy) + LAYER_S * n_layers * (1 forward, 3 forward + backward)
               busy = sqrt(max(1, load average / cores)) on CPU (1 on a GPU)
  one round    R = the sum of t over the points timed together
  timing       warm-up R, then max(MIN_ROUNDS * R, budget + R) when the spread never settles (the budget is
               checked after each round), or as little as MIN_ROUNDS * R when every point settles at once
  setup        SETUP_S (+ FIRST_BUILD_S once per process) + BUILD_S_PER_PARAM * parameters per model
EFFICIENCY, busy, LAYER_S and SETUP_S were read off this project's 2-core CPU: small models reached 45-68% of
the matmul probe when idle (load 2), 14% at load 9 and 10-12% at load 13-16 (their matmuls are small; attention,
norms and activations add work the probe has none of, and other processes take turns on the cores). 0.5 with
busy's square root keeps both ends within 2x (idle: 1.7x slow; load 9: 1.7x fast). Each layer costs ~0.1 ms of
dispatch even when it does no arithmetic, and the
first real build in a process imports sympy (torch's to_empty -> empty_like -> symbolic_shapes): 1-2 s.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import torch

from engine.budget.flops import decode_flops, headline_flops
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.measure.latency import MODES, device_peak
from engine.measure.rounds import MIN_ROUNDS, cpu_threads
from engine.validation import choice_problem, require

EFFICIENCY = 0.5
LAYER_S = 1e-4
SETUP_S = 0.05          # an idle set-up is ~0.01 s; a loaded one more (busy scales the rounds, not this)
FIRST_BUILD_S = 1.5       # until torch.fx.experimental.symbolic_shapes has been imported in this process
BUILD_S_PER_PARAM = {"cpu": 2e-8, "cuda": 1e-10}   # gpt2 (124M) built in 2.2 s on one busy core


@dataclass(frozen=True)
class DurationEstimate:
    low_s: float          # every point settles after MIN_ROUNDS rounds
    high_s: float         # the spread never settles: the time budget runs out
    round_s: float        # one round of every point
    how: str
    note: str = ""        # why the time budget does not bound it, when it does not ("" otherwise)

    @property
    def text(self) -> str:
        if self.high_s < 1.25 * self.low_s:
            return f"about {_secs(self.high_s)}"
        return f"{_secs(self.low_s)} to {_secs(self.high_s)}"


def budget_note(round_s: float, budget_s: float, what: str = "points") -> str:
    """Said when MIN_ROUNDS rounds outlast the time budget: the budget ends the rounds after it is spent, but
    never before MIN_ROUNDS (a median and quartiles of fewer samples say little), so it cannot cut the time."""
    if MIN_ROUNDS * round_s <= budget_s:
        return ""
    return (f"{MIN_ROUNDS} rounds of ≈ {_secs(round_s)} are the fewest a median and quartiles need, so a "
            f"{_secs(budget_s)} time budget cannot end it sooner; fewer {what} or shorter sequences would")


def _secs(s: float) -> str:
    return f"{s:,.1f} s" if s < 10 else f"{s:,.0f} s"


def busy() -> float:
    """How much slower than idle the CPU runs now: sqrt of the load per core, at least 1."""
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)) ** 0.5
    except OSError:
        return 1.0


def _peak(device: torch.device, dtype: str) -> float:
    """EFFICIENCY x the peak of the threads a timing would use now (rounds.cpu_threads), over busy() on CPU."""
    if device.type != "cpu":
        peak, _ = device_peak(device, dtype)
        return EFFICIENCY * peak if peak else 1e9      # no peak known: a conservative 1 GFLOP/s
    return EFFICIENCY * device_peak(device, dtype, cpu_threads())[0] / busy()


def _load_note(device: torch.device) -> str:
    b = busy() if device.type == "cpu" else 1.0
    return f", {b:.1f}x slower for the current load" if b > 1.05 else ""


def _setup_s() -> float:
    first = "torch.fx.experimental.symbolic_shapes" not in sys.modules
    return SETUP_S + (FIRST_BUILD_S if first else 0.0)


def call_seconds(cfg: ModelConfig, batch: int, seq: int, mode: str, dtype: str, device: torch.device) -> float:
    """Estimated seconds of one timed call (forward, or forward + backward) at batch x seq."""
    require(choice_problem("mode", mode, MODES))   # any other word would silently price a forward pass
    f = headline_flops(cfg, batch, seq)
    flops = f.forward_flops + (f.backward_flops if mode == "train" else 0)
    return flops / _peak(device, dtype) + LAYER_S * cfg.n_layers * (3 if mode == "train" else 1)


def _duration(build_s: float, round_s: float, budget_s: float) -> tuple[float, float]:
    """(low, high): a warm-up round, then MIN_ROUNDS rounds, or rounds until the budget is spent."""
    return (build_s + (1 + MIN_ROUNDS) * round_s, build_s + round_s + max(MIN_ROUNDS * round_s, budget_s + round_s))


def sweep_estimate(cfg: ModelConfig, batches: list[int], seqs: list[int], mode: str, dtype: str,
                   device: torch.device, budget_s: float) -> DurationEstimate:
    """The batch x sequence sweep of engine.measure.latency.latency_sweep."""
    r = sum(call_seconds(cfg, b, s, mode, dtype, device) for b in batches for s in seqs)
    build = _setup_s() + BUILD_S_PER_PARAM.get(device.type, 2e-8) * count_params(cfg).total
    low, high = _duration(build, r, budget_s)
    return DurationEstimate(low, high, r, f"{len(batches) * len(seqs)} points, one round ≈ {_secs(r)} "
                            f"(closed-form FLOPs at {EFFICIENCY:.0%} of the measured peak{_load_note(device)}), "
                            f"time budget {_secs(budget_s)}, at least {MIN_ROUNDS} rounds, set-up and model build ≈ "
                            f"{_secs(build)}", budget_note(r, budget_s))


def decode_estimate(variants: dict[str, ModelConfig], contexts: list[int], batch: int, dtype: str,
                    device: torch.device, budget_s: float) -> DurationEstimate:
    """The decode comparison of engine.measure.decode.measure_decode: filling the caches, then interleaved
    rounds over the variants at each context."""
    def step(cfg: ModelConfig, ctx: int) -> float:
        return decode_flops(cfg, batch, ctx) / _peak(device, dtype) + LAYER_S * cfg.n_layers

    rounds = [sum(step(c, ctx) for c in variants.values()) for ctx in contexts]
    fill = sum(call_seconds(c, batch, max(contexts), "forward", dtype, device) for c in variants.values())
    per_param = BUILD_S_PER_PARAM.get(device.type, 2e-8)
    build = _setup_s() + sum(per_param * count_params(c).total for c in variants.values())
    spans = [_duration(0.0, r, budget_s / len(contexts)) for r in rounds]
    low, high = build + fill + sum(lo for lo, _ in spans), build + fill + sum(hi for _, hi in spans)
    return DurationEstimate(low, high, sum(rounds), f"{len(variants)} variants x {len(contexts)} contexts, caches "
                            f"filled in ≈ {_secs(fill)}, time budget {_secs(budget_s)}, model builds ≈ "
                            f"{_secs(build)} with set-up", budget_note(max(rounds), budget_s / len(contexts),
                                                                      "contexts"))


META_S_PER_LAYER = 0.02   # FlopCounterMode over one layer on the meta device (dispatch only), idle


def measure_estimate(cfg: ModelConfig, flops_at: tuple[int, int] | None, built_at: tuple[int, int] | None,
                     dtype: str, device: torch.device) -> DurationEstimate:
    """The Budgets page's Measure (engine.measure.suite): FLOPs counted on the meta device (`flops_at`: batch,
    seq; None when skipped), then, at `built_at` (None when refused), the model built twice for real: one
    training-mode forward for the saved activations, and a prefill plus one decode step for the KV cache."""
    b = busy() if device.type == "cpu" else 1.0
    count = (_setup_s() + META_S_PER_LAYER * cfg.n_layers * b) if flops_at else 0.0
    build = run = 0.0
    if built_at:
        batch, seq = built_at
        build = 2 * (SETUP_S + BUILD_S_PER_PARAM.get(device.type, 2e-8) * count_params(cfg).total * b)
        run = 2 * call_seconds(cfg, batch, seq, "forward", dtype, device)   # the forward + loss, the prefill
    total = count + build + run
    return DurationEstimate(total, 2 * total, 0.0, f"FLOP count on the meta device ≈ {_secs(count)}, two model "
                            f"builds ≈ {_secs(build)}, two forward passes ≈ {_secs(run)} (closed-form FLOPs at "
                            f"{EFFICIENCY:.0%} of the measured peak{_load_note(device)}); up to twice that")
