"""What the Latency page shows, as pure functions of engine results (tested without Streamlit): the sweep table,
its caption, progress text and the decode summary."""
from __future__ import annotations

import os
from typing import Mapping, Sequence

import torch

from engine.config import ModelConfig
from engine.measure import latency as lat
from engine.measure.decode import DecodePoint
from engine.measure.rounds import NOISY_SPREAD, Progress, cpu_threads
from engine.units import fmt_bytes, fmt_flops

NOISY_NOTE = (f"noisy: the middle half of the samples spans more than {NOISY_SPREAD:.0%} of the median, so "
              "differences smaller than that are not resolved (another process was busy; measure again)")


def device_text(dev: torch.device) -> str:
    """Where and how the page times, said before anything is timed."""
    if dev.type == "cuda":
        return (f"Measured on **{lat.device_label(dev)}**: CUDA events around each call, then a synchronize (GPU "
                "kernels run asynchronously).")
    n, cores = cpu_threads(), os.cpu_count() or torch.get_num_threads()
    return (f"Measured on **this CPU ({cores} cores)**: wall clock around each call, on the threads other processes "
            f"leave a core for (now {n} of {torch.get_num_threads()}; busy threads wait for each other at every "
            "parallel step).")


def noise_text(median_ms: float, iqr_ms: float, noisy: bool) -> str:
    share = iqr_ms / median_ms if median_ms > 0 else 0.0
    return f"noisy ({share:.0%})" if noisy else f"{share:.0%}"


def sweep_rows(cfg: ModelConfig, results: Sequence[lat.LatencyResult]) -> list[dict[str, str]]:
    """One row per measured point: timing, spread and the noisy flag, throughput, achieved FLOP/s and MFU, and
    the memory estimate beside CUDA's measured peak."""
    rows = []
    for r in results:
        m = lat.memory_check(cfg, r)
        rows.append({"batch": f"{r.batch:,}", "seq": f"{r.seq:,}", "median ms": f"{r.median_ms:,.3f}",
                     "IQR ms": f"{r.iqr_ms:,.3f}", "IQR / median": noise_text(r.median_ms, r.iqr_ms, r.noisy),
                     "calls timed": f"{r.runs:,}", "tokens/s": f"{r.tokens_per_s:,.0f}",
                     "achieved": fmt_flops(r.achieved_tflops * 1e12, "FLOP/s"), "MFU": r.mfu_text,
                     "peak memory (measured)": fmt_bytes(m.measured) if m else "not available on CPU",
                     "memory estimate": fmt_bytes(lat.memory_estimate(cfg, r.batch, r.seq, r.dtype, r.mode)[0]),
                     "estimate error": f"{m.error_pct:+.1f}%" if m else "—"})
    return rows


def sweep_caption(cfg: ModelConfig, results: Sequence[lat.LatencyResult], on_gpu: bool) -> str:
    r = results[0]
    peak = fmt_flops(r.peak_flops, "FLOP/s") if r.peak_flops else "unknown"
    wrong = [x for x in results if x.mfu is None and x.peak_flops]
    text = (f"FLOPs per call from the closed form (engine.budget.flops, the full attention square as PaLM's MFU "
            f"counts it); MFU = achieved FLOP/s / the {r.dtype} peak of **{r.profile or 'no profile'}** ({peak}). ")
    if wrong:
        text += (f"{len(wrong)} point(s) ran faster than that peak, which is impossible: the peak estimate is wrong "
                 "(probed while the machine was busier), so no MFU is shown for them; later readings use the "
                 "higher figure. ")
    if any(x.noisy for x in results):
        text += f"Points marked ✕ are {NOISY_NOTE}. "
    text += f"Memory estimate: {lat.memory_estimate(cfg, 1, 1, r.dtype, r.mode)[1]}. "
    return text + ("Peak memory is torch.cuda.max_memory_allocated during the sweep; estimate error = "
                   "(estimate - measured) / measured." if on_gpu else
                   "Peak memory is measured on CUDA only: not available on CPU.")


def progress_text(p: Progress, what: str) -> str:
    left = "finishing" if p.left_s <= 0 else f"at most {p.left_s:,.0f} s left"
    return f"{what}: round {p.rounds:,}, {p.elapsed_s:,.1f} s timed, {left}"


def progress_share(p: Progress) -> float:
    total = p.elapsed_s + p.left_s
    return min(1.0, p.elapsed_s / total) if total > 0 else 1.0


def decode_progress_text(done: int, total: int, curves: Mapping[str, Sequence[DecodePoint]], elapsed_s: float) -> str:
    """The context just timed, each variant's step time, and the time left at the pace so far."""
    last = {k: v[-1] for k, v in curves.items() if v}
    ctx = next(iter(last.values())).context
    left = elapsed_s / done * (total - done)
    return (f"context {ctx:,} done ({done}/{total}): " + ", ".join(f"{k} {p.median_ms:.3f} ms" for k, p in last.items())
            + (f"; about {left:,.0f} s left" if done < total else ""))


def decode_caption(curves: Mapping[str, Sequence[DecodePoint]]) -> str:
    last = {k: v[-1] for k, v in curves.items() if v}
    text = "At the longest context: " + "; ".join(
        f"{k} {p.median_ms:.3f} ms/token (IQR {p.iqr_ms:.3f} ms{', noisy' if p.noisy else ''}) with a "
        f"{fmt_bytes(p.cache_bytes)} cache" for k, p in last.items()) + ". "
    if any(p.noisy for v in curves.values() for p in v):
        text += f"Points marked ✕ are {NOISY_NOTE}. "
    return text + ("The variants were timed in interleaved rounds at each context, so load hit them alike. Small "
                   "models on a CPU are bound by the weights, not the cache; the gap opens with long contexts "
                   "and big batches.")
