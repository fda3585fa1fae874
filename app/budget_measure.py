"""The Budgets page's "Estimate vs measurement" flow: which measurements run for a config, what is skipped or
refused and why, and the table rows. No Streamlit here: the page passes `progress` (st.write) and draws."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from engine.config import ModelConfig
from engine.guard import MemoryRefusal
from engine.measure import Measurement
from engine.measure.stats import StatsRefusal, check_live
from engine.measure.suite import measure_config
from engine.units import fmt_bytes, fmt_flops

MEASURE_MAX_SEQ = 256     # real-model measurements on the Budgets page stay seconds long on a CPU
MEASURE_MAX_LAYERS = 256  # FlopCounterMode on meta costs ~20 ms a layer here: 1,000 layers stalled the page 30 s


def measure_seq(seq: int) -> int:
    """The sequence the page measures at: the page's own, capped at MEASURE_MAX_SEQ."""
    return min(seq, MEASURE_MAX_SEQ)


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


def measure_budgets(cfg: ModelConfig, seq: int, dtype: str, attention: str, device: str,
                    progress: Callable[[str], None] | None = None) -> BudgetMeasurement:
    """At batch 1: FLOPs counted on the meta device (up to MEASURE_MAX_LAYERS layers), then activation and
    KV-cache bytes of a real model when check_live and the memory guard allow one on `device`."""
    out = BudgetMeasurement()
    if cfg.n_layers <= MEASURE_MAX_LAYERS:
        out.measured |= measure_config(cfg, 1, seq, dtype, attention, device, ("flops",), progress)
    else:
        out.skipped = (f"n_layers: not counting FLOPs on the meta device for {cfg.n_layers:,} layers (at most "
                       f"{MEASURE_MAX_LAYERS:,}, each costs tens of ms); the closed form above stands.")
    try:
        check_live(cfg, device)
        out.measured |= measure_config(cfg, 1, seq, dtype, attention, device, ("activations", "kv_cache"), progress)
    except (StatsRefusal, MemoryRefusal) as e:
        out.refused = f"Not building a real model: {e}"
    return out
