"""All closed-form budgets for one config (params, memory, KV cache, FLOPs, intensity, roofline; goal < 1 ms),
against the measured cross-checks of the same config in the same run: FlopCounterMode over a meta-device
forward + backward, and building the model on the meta device."""
from __future__ import annotations

import time

import torch

from bench import median_seconds
from engine.budget.devices import roofline
from engine.budget.flops import flops_budget
from engine.budget.memory import memory_budget
from engine.measure.flops import counted_flops
from engine.model import build_model
from engine.presets import get_preset

PRESET, BATCH, SEQ = "llama-3-8b", 1, 2048
ESTIMATES, MEASURES = 20, 3


def all_budgets(cfg) -> None:
    memory_budget(cfg, BATCH, SEQ)          # count_params, activations per layer, KV cache, formulas
    flops_budget(cfg, BATCH, SEQ)
    roofline(cfg, "H100", BATCH, SEQ)       # arithmetic intensity of prefill and one decode step


def main() -> None:
    cfg = get_preset(PRESET).config
    ours = median_seconds(lambda: all_budgets(cfg), ESTIMATES, number=100)
    meta = median_seconds(lambda: build_model(cfg, "meta"), MEASURES)
    counter = median_seconds(lambda: counted_flops(cfg, BATCH, SEQ), MEASURES)
    print(f"{PRESET} at batch {BATCH}, seq {SEQ}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"  {'all closed-form budgets (memory, FLOPs, roofline), median':<62}{ours * 1e6:>10.1f} us  "
          f"goal < 1 ms: {'met' if ours < 1e-3 else 'MISSED'}")
    print(f"  {'build_model on meta (what sizing by building costs)':<62}{meta * 1e3:>10.1f} ms  "
          f"{meta / ours:,.0f}x the closed forms")
    print(f"  {'FlopCounterMode over meta forward + backward':<62}{counter * 1e3:>10.1f} ms  "
          f"{counter / ours:,.0f}x the closed forms")
    stamp = time.strftime("%Y-%m-%d")
    print(f"  ({stamp}; closed forms median of {ESTIMATES}x100 calls, peers median of {MEASURES})")
