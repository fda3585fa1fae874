"""The Budgets page's "Estimate vs measurement" flow: which measurements run for a config, what is skipped or
refused and why, and the table rows. No Streamlit here: the page passes `progress` (st.write) and draws."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from engine.config import ModelConfig
from engine.guard import MemoryRefusal
from engine.measure import Measurement
from engine.measure.stats import StatsRefusal, check_live
from engine.measure.suite import measure_config
from engine.units import fmt_bytes, fmt_flops

MEASURE_MAX_TOKENS = 4096  # batch x seq of a real model built on the Budgets page: seconds, not minutes, on a CPU
MEASURE_MAX_LAYERS = 256   # FlopCounterMode on meta costs ~20 ms a layer here: 1,000 layers stalled the page 30 s


def measure_sizes(batch: int, seq: int, device: str) -> tuple[int, int, str | None]:
    """(batch, seq) a real-model measurement runs at, and what was capped and why (None: the page's own).
    On CPU at most MEASURE_MAX_TOKENS tokens per step: the batch shrinks first, then the sequence; saved bytes
    per token do not depend on the batch, so a smaller batch still tests the same closed form. CUDA: as asked
    (the memory guard refuses what does not fit)."""
    if device != "cpu" or batch * seq <= MEASURE_MAX_TOKENS:
        return batch, seq, None
    b = max(1, MEASURE_MAX_TOKENS // seq)
    s = min(seq, MEASURE_MAX_TOKENS // b)
    return b, s, (f"Real-model measurements on a CPU are capped at {MEASURE_MAX_TOKENS:,} tokens per step so they "
                  f"take seconds: building and running batch {b:,} x sequence {s:,} instead of the page's "
                  f"{batch:,} x {seq:,}. FLOPs are still counted at {batch:,} x {seq:,} (on the meta device).")


class MeasurePlan(NamedTuple):
    """What one press of Measure will do, known before it starts (so its duration can be estimated): (batch, seq)
    of the FLOP count on the meta device and of the real builds, each None with the reason it is left out."""
    flops_at: tuple[int, int] | None
    built_at: tuple[int, int] | None
    skipped: str | None = None
    refused: str | None = None


def measure_plan(cfg: ModelConfig, batch: int, seq: int, device: str) -> MeasurePlan:
    """The FLOP count at batch x seq up to MEASURE_MAX_LAYERS layers; the real builds at measure_sizes when
    check_live allows one on `device`."""
    flops_at, skipped = (batch, seq), None
    if cfg.n_layers > MEASURE_MAX_LAYERS:
        flops_at, skipped = None, (f"n_layers: not counting FLOPs on the meta device for {cfg.n_layers:,} layers "
                                   f"(at most {MEASURE_MAX_LAYERS:,}, each costs tens of ms); the closed form "
                                   "above stands.")
    b, s, _ = measure_sizes(batch, seq, device)
    try:
        check_live(cfg, device, s)
    except StatsRefusal as e:
        return MeasurePlan(flops_at, None, skipped, f"Not building a real model: {e}")
    return MeasurePlan(flops_at, (b, s), skipped)


@dataclass
class BudgetMeasurement:
    """What one press of Measure produced: the measurements keyed as engine.measure.suite names them, the
    FLOP count skipped (why), and the real build refused (why)."""
    measured: dict[str, Measurement] = field(default_factory=dict)
    skipped: str | None = None
    refused: str | None = None

    def rows(self) -> list[tuple[Measurement, Callable[[float], str]]]:
        """(measurement, formatter) rows for app.tables.measurements_table: FLOPs in FLOP, the rest in bytes."""
        return [(m, fmt_flops if key.endswith("_flops") else fmt_bytes) for key, m in self.measured.items()]


def measure_budgets(cfg: ModelConfig, batch: int, seq: int, dtype: str, attention: str, device: str,
                    progress: Callable[[str], None] | None = None) -> BudgetMeasurement:
    """What measure_plan says: FLOPs counted on the meta device, then activation and KV-cache bytes of a real
    model (a MemoryRefusal from engine.guard on the way is reported the same)."""
    plan = measure_plan(cfg, batch, seq, device)
    out = BudgetMeasurement(skipped=plan.skipped, refused=plan.refused)
    if plan.flops_at:
        try:
            out.measured |= measure_config(cfg, *plan.flops_at, dtype, attention, device, ("flops",), progress)
        except MemoryRefusal as e:
            out.skipped = f"Not counting FLOPs on the meta device: {e}"
    if plan.built_at:
        try:
            out.measured |= measure_config(cfg, *plan.built_at, dtype, attention, device, ("activations", "kv_cache"),
                                           progress)
        except MemoryRefusal as e:
            out.refused = f"Not building a real model: {e}"
    return out
