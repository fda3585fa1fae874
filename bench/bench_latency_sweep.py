"""The Latency page's default sweep and decode comparison on gpt2, timed end to end beside the estimate the page
shows before the click (issue #15: a default sweep within ~60 s on a 2-core CPU, estimate within 2x).

`python -m bench latency_sweep` -- prints Markdown rows for bench/RESULTS.md.
"""
from __future__ import annotations

import os
import time

import torch

from app import latency_plan
from engine.layers.kv_heads import attention_variants
from engine.measure import latency as lat
from engine.measure.decode import measure_decode
from engine.measure.estimate import decode_estimate, sweep_estimate
from engine.measure.rounds import cpu_threads
from engine.presets import get_preset

DTYPE, MODE = "fp32", "forward"


def main() -> None:
    cfg, dev = get_preset("gpt2").config, torch.device("cpu")
    load = os.getloadavg()[0]
    batches, seqs = latency_plan.default_sweep(cfg, dev, DTYPE, MODE)
    est = sweep_estimate(cfg, batches, seqs, MODE, DTYPE, dev, latency_plan.SWEEP_BUDGET_S)
    t = time.perf_counter()
    results = lat.latency_sweep(cfg, batches, seqs, DTYPE, "cpu", MODE, latency_plan.SWEEP_BUDGET_S)
    sweep_s = time.perf_counter() - t
    variants = attention_variants(cfg)
    contexts = latency_plan.decode_contexts(cfg, "cpu")
    dest = decode_estimate(variants, contexts, 1, DTYPE, dev, latency_plan.DECODE_BUDGET_S)
    t = time.perf_counter()
    curves = measure_decode(variants, contexts, 1, DTYPE, "cpu", latency_plan.DECODE_BUDGET_S)
    decode_s = time.perf_counter() - t
    print(f"gpt2, {DTYPE} {MODE}, batches {batches} x seqs {seqs}; {cpu_threads()} timing thread(s), "
          f"1-minute load {load:.1f} on {os.cpu_count()} cores, torch {torch.__version__}\n")
    print("| what | estimate shown before | real | rounds | noisy points |")
    print("|---|---|---:|---:|---:|")
    print(f"| sweep ({len(results)} points) | {est.text} | {sweep_s:.1f} s | {results[0].runs} | "
          f"{sum(r.noisy for r in results)} |")
    points = [p for v in curves.values() for p in v]
    print(f"| decode ({', '.join(variants)} x {len(contexts)} contexts) | {dest.text} | {decode_s:.1f} s | - | "
          f"{sum(p.noisy for p in points)} of {len(points)} |")
    for r in results:
        print(f"|   batch {r.batch} x seq {r.seq} | | {r.median_ms:,.1f} ms (IQR {r.iqr_ms:,.1f}) | {r.runs} | "
              f"MFU {r.mfu_text} |")
