"""A 100-point closed-form sweep (goal: well under a second) against sizing the same points by building each
model on the meta device and summing numel (the peer, timed on a sample of the points in the same run)."""
from __future__ import annotations

import time

import torch

from bench import median_seconds
from engine.model import build_model
from engine.presets import get_preset
from engine.sweep import run_sweep

PRESET = "llama-3-8b"
KNOBS = {"attn_window": [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, None],
         "n_layers": [8, 12, 16, 20, 24, 28, 32, 40, 48, 64]}
REPEAT, SAMPLE = 5, 5


def main() -> None:
    cfg = get_preset(PRESET).config
    sweep = run_sweep(cfg, KNOBS)
    assert len(sweep.points) == 100 and all(p.valid for p in sweep.points)
    ours = median_seconds(lambda: run_sweep(cfg, KNOBS), REPEAT)
    sample = [p.config for p in sweep.points[::len(sweep.points) // SAMPLE]][:SAMPLE]
    meta = median_seconds(lambda: [sum(t.numel() for t in build_model(c, "meta").parameters()) for c in sample],
                          1) / len(sample)
    print(f"{PRESET}: attn_window x n_layers, 100 points, 7 closed-form metrics each; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"  {'closed-form sweep of 100 points, median of ' + str(REPEAT):<58}{ours * 1e3:>10.1f} ms  "
          f"goal < 1 s: {'met' if ours < 1 else 'MISSED'}")
    print(f"  {'per point: closed forms':<58}{ours / 100 * 1e3:>10.3f} ms")
    print(f"  {'per point: build on meta + sum numel (params only), ' + str(SAMPLE) + ' points':<58}"
          f"{meta * 1e3:>10.1f} ms  {meta / (ours / 100):,.0f}x")
    print(f"  ({time.strftime('%Y-%m-%d')})")
