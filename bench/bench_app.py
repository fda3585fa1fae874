"""Rerun time of the Design page after a knob change, for every preset (goal < 300 ms), measured with AppTest.

The knob is n_layers. Peer in the same run, interleaved: the same rerun with st.cache_data cleared first, i.e.
the page recomputing every engine result (count_params, memory, KV cache, FLOPs) instead of a cache hit."""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

from engine.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
REPEAT, GOAL_S = 9, 0.300


def _entry(app_path: str) -> None:
    import runpy
    runpy.run_path(app_path, run_name="__main__")


def rerun_seconds(preset: str) -> tuple[float, float]:
    """(cached, uncached) median wall time of AppTest reruns of the Design page after a change of n_layers.
    Interleaved so both see the same machine load: clear the cache, switch to config A (uncached rerun),
    switch to B (fills its cache entry), switch back to A (cached rerun)."""
    at = AppTest.from_function(_entry, args=(str(ROOT / "streamlit_app.py"),), default_timeout=120)
    at.query_params["preset"] = preset
    at.run()
    layers = PRESETS[preset].config.n_layers
    cached, uncached = [], []

    def flip(n: int) -> float:
        knob = at.sidebar.text_input(key="field_n_layers").input(str(n))
        start = time.perf_counter()
        knob.run()
        if at.exception:
            raise RuntimeError(f"{preset}: {at.exception[0].value}")
        return time.perf_counter() - start

    for i in range(REPEAT):
        a, b = layers + 1 + i % 2, layers + 2 - i % 2
        st.cache_data.clear()
        uncached.append(flip(a))
        flip(b)
        cached.append(flip(a))
    return statistics.median(cached), statistics.median(uncached)


def main() -> None:
    print(f"Design page rerun after a knob change (AppTest, median of {REPEAT}); torch {torch.__version__}, "
          f"python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d')}")
    print(f"  {'preset':<18}{'cached':>12}{'no cache':>12}{'ratio':>8}  goal < {GOAL_S * 1e3:.0f} ms")
    worst = 0.0
    for name in PRESETS:
        ours, peer = rerun_seconds(name)
        worst = max(worst, ours)
        print(f"  {name:<18}{ours * 1e3:>9.1f} ms{peer * 1e3:>9.1f} ms{peer / ours:>7.2f}x  "
              f"{'met' if ours < GOAL_S else 'MISSED'}")
    print(f"  worst cached rerun {worst * 1e3:.1f} ms: goal {'met' if worst < GOAL_S else 'MISSED'}")


if __name__ == "__main__":
    main()
