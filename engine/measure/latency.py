"""Measured latency: forward, forward+backward and KV-cached decode steps of a real model.

Equal parameter counts do not mean equal runtime, so we time, in interleaved rounds with an adaptive stop
(engine.measure.rounds): the points of one sweep, and the variants of one decode chart, share every round, so
load from another process hits them alike. MFU divides the achieved FLOP/s by this device's peak: the
catalogue for known GPUs, else a matmul probe (engine.measure.probe). A reading above 100% is impossible, so
it is never printed: it means the peak estimate is wrong (the probe ran on a busier machine), and the peak is
raised to what the model achieved for later readings.
"""
from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from engine.budget.devices import DEVICE_PROFILES
from engine.budget.flops import flops_budget, headline_flops
from engine.budget.memory import memory_budget, output_logits_bytes, pure_policy
from engine.config import ModelConfig
from engine.guard import check_fits
from engine.layers.position import seq_problem
from engine.measure import Measurement
from engine.measure.probe import machine_peaks, raise_peak
from engine.measure.rounds import (LOCK, NOISY_SPREAD, TARGET_SPREAD, Progress, Timing, busy, check_budget,  # noqa: F401
                                   interleaved, time_fn, timing_session)
from engine.model import DecoderLM, build_model
from engine.runtime import TORCH_DTYPES, dtype_name, resolve_device
from engine.validation import choice_problem, require, size_problems

MODES = ("forward", "train")     # train = forward + backward of the cross-entropy loss (no optimizer step)


@dataclass(frozen=True)
class LatencyResult:
    name: str
    mode: str
    device: str
    dtype: str
    batch: int
    seq: int
    median_ms: float
    iqr_ms: float
    runs: int
    tokens_per_s: float
    flops: float                       # closed-form FLOPs of one call (PaLM's MFU convention: the full square)
    achieved_tflops: float
    mfu: float | None                  # achieved / peak; None without a peak, or when it would exceed 1
    profile: str | None
    peak_memory_bytes: int | None      # CUDA only: torch.cuda.max_memory_allocated during the timing
    peak_flops: float | None = None    # the device peak MFU was computed against

    @property
    def spread(self) -> float:
        """IQR / median of the timed calls."""
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else 0.0

    @property
    def noisy(self) -> bool:
        """The middle half of the samples spans more than NOISY_SPREAD of the median."""
        return self.spread > NOISY_SPREAD

    @property
    def mfu_text(self) -> str:
        if self.mfu is not None:
            return f"{100 * self.mfu:.3g}%"
        return "peak estimate is wrong" if self.peak_flops else "no device peak"

    def as_dict(self) -> dict:
        return asdict(self) | {"noisy": self.noisy, "spread": self.spread}


def device_label(dev: torch.device) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return f"cpu (timing threads: {torch.get_num_threads()} of {os.cpu_count() or torch.get_num_threads()})"


def device_peak(dev: torch.device, dtype: str, threads: int | None = None) -> tuple[float | None, str | None]:
    """(peak FLOP/s in `dtype`, where it comes from): the catalogue entry a GPU's name contains, else this
    device measured by the matmul probe (on CPU with `threads` threads, default torch's current count)."""
    if dev.type == "cuda":
        gpu = torch.cuda.get_device_name(dev)
        known = next((k for k, p in DEVICE_PROFILES.items() if p.match and p.match in gpu), None)
        if known is not None:
            return DEVICE_PROFILES[known].peak_flops.get(dtype) or None, known
        return machine_peaks(dev)[dtype], f"{gpu} (measured)"
    return machine_peaks(dev, threads)[dtype], "CPU (measured)"


def mfu(achieved: float, peak: float | None) -> float | None:
    """achieved / peak, or None when there is no peak or the ratio would exceed 1 (then the peak is wrong)."""
    if not peak or achieved > peak:
        return None
    return achieved / peak


def memory_estimate(cfg: ModelConfig, batch: int, seq: int, dtype: str = "fp32",
                    mode: str = "forward") -> tuple[int, str]:
    """Closed-form bytes the timed call should peak at (to set beside CUDA's measured peak) and how."""
    b = memory_budget(cfg, batch, seq, dtype, pure_policy(dtype))
    if mode == "train":
        return (b.weights_bytes + b.grads_bytes + b.activations_bytes,
                "closed form: weights + gradients + saved activations (no optimizer state is timed)")
    return b.weights_bytes + output_logits_bytes(cfg, batch, seq, dtype), "closed form: weights + the batch's logits (no grad, no KV cache kept)"


def memory_check(cfg: ModelConfig, r: LatencyResult) -> Measurement | None:
    """CUDA's measured peak of a timed call beside memory_estimate; None where nothing was measured (CPU)."""
    if r.peak_memory_bytes is None:
        return None
    est, how = memory_estimate(cfg, r.batch, r.seq, r.dtype, r.mode)
    return Measurement(f"peak memory, batch {r.batch} x seq {r.seq}", est, r.peak_memory_bytes,
                       f"torch.cuda.max_memory_allocated during the timing; estimate: {how}")


def check_request(cfg: ModelConfig, batch: int, seq: int, dtype: str, mode: str = "forward") -> None:
    """ValueError naming every bad argument (batch, seq, dtype, mode) and what is allowed."""
    require(*(size_problems(batch, seq) or [seq_problem(cfg, seq)]), choice_problem("dtype", dtype, TORCH_DTYPES),
            choice_problem("mode", mode, MODES))


def _step_fn(model: DecoderLM, x: torch.Tensor, mode: str) -> Callable[[], object]:
    if mode == "forward":
        def forward():
            with torch.no_grad():
                return model(x)
        return forward

    def forward_backward():
        model.zero_grad(set_to_none=True)
        logits = model(x)
        F.cross_entropy(logits.flatten(0, 1).float(), x.flatten()).backward()
    return forward_backward


def prepare(cfg: ModelConfig, batch: int, seq: int, dtype: str = "fp32", device: str = "auto",
            mode: str = "forward") -> tuple[DecoderLM, torch.device]:
    """Validate, refuse what would not fit (MemoryRefusal with the numbers), then build the real model."""
    check_request(cfg, batch, seq, dtype, mode)
    dev = resolve_device(device)
    check_fits(cfg, dev, batch, seq, dtype, mode == "train")
    model = build_model(cfg, device=dev, dtype=TORCH_DTYPES[dtype])
    model.train(mode == "train")
    return model, dev


def _inputs(cfg: ModelConfig, batch: int, seq: int, dev: torch.device, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(cfg.vocab_size, (batch, seq), generator=gen).to(dev)


def _result(model: DecoderLM, batch: int, seq: int, mode: str, t: Timing) -> LatencyResult:
    cfg, p = model.cfg, next(model.parameters())
    dev, dtype = p.device, dtype_name(p.dtype)
    fb = flops_budget(cfg, batch, seq)
    flops = fb.forward_flops + (fb.backward_flops if mode == "train" else 0)
    achieved = flops / t.median_s
    peak, profile = device_peak(dev, dtype)
    reading = mfu(achieved, peak)
    if peak is not None and profile.endswith("(measured)"):     # causal FLOPs: never above the work done
        needed = headline_flops(cfg, batch, seq)
        raise_peak(dev, dtype, (needed.forward_flops + (needed.backward_flops if mode == "train" else 0))
                   / t.median_s)
    return LatencyResult(
        cfg.name, mode, device_label(dev), dtype, batch, seq, t.median_s * 1e3, t.iqr_s * 1e3, t.runs,
        batch * seq / t.median_s, flops, achieved / 1e12, reading, profile,
        torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None, peak)


def measure(model: DecoderLM, batch: int, seq: int, mode: str = "forward", budget_s: float = 0.3,
            seed: int = 0) -> LatencyResult:
    """Time one call of `model` on random tokens [batch, seq]; the model's device and dtype are used."""
    p = next(model.parameters())
    check_request(model.cfg, batch, seq, dtype_name(p.dtype), mode)
    if p.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(p.device)
    fn = _step_fn(model, _inputs(model.cfg, batch, seq, p.device, seed), mode)
    with timing_session(p.device):            # the result names the threads and their peak
        return _result(model, batch, seq, mode, interleaved([fn], p.device, budget_s)[0])


def measure_latency(cfg: ModelConfig, batch: int, seq: int, dtype: str = "fp32", device: str = "auto",
                    mode: str = "forward", budget_s: float = 0.3) -> LatencyResult:
    check_budget(budget_s)
    model, _ = prepare(cfg, batch, seq, dtype, device, mode)
    return measure(model, batch, seq, mode, budget_s)


def latency_sweep(cfg: ModelConfig, batches: list[int], seqs: list[int], dtype: str = "fp32",
                  device: str = "auto", mode: str = "forward", budget_s: float = 10.0,
                  on_round: Callable[[Progress, list[LatencyResult]], None] | None = None,
                  stop: threading.Event | None = None, target_spread: float = TARGET_SPREAD) -> list[LatencyResult]:
    """Every (batch, seq) pair of one model (built once, refused first if the largest pair would not fit),
    timed in interleaved rounds within `budget_s` (engine.measure.rounds). on_round(progress, results so far)
    after each round; setting `stop` ends the sweep after the current round."""
    dev = resolve_device(device)
    with timing_session(dev):        # building on CPU also runs faster on the threads that have a core
        model, _ = prepare(cfg, max(batches), max(seqs), dtype, device, mode)
        pairs = [(b, s) for b in sorted(set(batches)) for s in sorted(set(seqs))]
        fns = [_step_fn(model, _inputs(cfg, b, s, dev, seed), mode) for seed, (b, s) in enumerate(pairs)]
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)     # the peak of the sweep's largest call, shared by its points

        def results(timings: list[Timing]) -> list[LatencyResult]:
            return [_result(model, b, s, mode, t) for (b, s), t in zip(pairs, timings)]

        report = None if on_round is None else (lambda p: on_round(p, results(p.timings)))
        return results(interleaved(fns, dev, budget_s, on_round=report, stop=stop, target_spread=target_spread))
