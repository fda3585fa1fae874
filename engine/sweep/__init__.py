"""Trade-off sweeps: one or two config knobs across their values, every closed-form consequence per point
(table.py), equal-parameter solving (hold.py), default grids from the field declarations (grid.py) and the
measured columns, latency and the loss of a short run, computed on demand (measured.py)."""
from engine.sweep.grid import KNOBS, default_values, value_label
from engine.sweep.hold import HOLD_FIELDS, HOLD_TARGETS, d_ff_step
from engine.sweep.table import METRICS, Metric, Point, Sweep, SweepSettings, pareto_front, parse_values, run_sweep

__all__ = ["HOLD_FIELDS", "HOLD_TARGETS", "KNOBS", "METRICS", "Metric", "Point", "Sweep", "SweepSettings",
           "d_ff_step", "default_values", "pareto_front", "parse_values", "run_sweep", "value_label"]
