"""Measured latency: forward, forward+backward and KV-cached decode steps of a real model.

Equal parameter counts do not mean equal runtime, so we time. GPU: warm-up, then CUDA events around each
call and a synchronize (kernels are asynchronous; wall clocks would time the launch). CPU:
torch.utils.benchmark with the process's real thread count (its default is one thread). Median and IQR,
never the mean: one hiccup should not move the number. One process-wide lock: two app sessions timing on
the same machine at once would each measure half a machine.
"""
from __future__ import annotations

import statistics
import threading
from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.nn.functional as F
import torch.utils.benchmark as benchmark

from engine.budget.devices import DEVICE_PROFILES
from engine.budget.flops import flops_budget
from engine.budget.memory import memory_budget, output_logits_bytes, pure_policy
from engine.config import ModelConfig
from engine.guard import check_fits
from engine.measure import Measurement
from engine.model import DecoderLM, KVCache, build_model
from engine.runtime import TORCH_DTYPES, dtype_name, resolve_device

MODES = ("forward", "train")     # train = forward + backward of the cross-entropy loss (no optimizer step)
LOCK = threading.Lock()          # held while anything is being timed in this process
MAX_MIN_TIME = 600.0           # seconds of timing per point; more is a typo, not a measurement


@dataclass(frozen=True)
class Timing:
    median_s: float
    iqr_s: float
    runs: int


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
    flops: float                       # closed-form FLOPs of one call (PaLM convention, no causal halving)
    achieved_tflops: float
    mfu: float | None                  # achieved / peak of the device profile; None without a profile
    profile: str | None
    peak_memory_bytes: int | None      # CUDA only: torch.cuda.max_memory_allocated during the timing

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class DecodePoint:
    context: int
    median_ms: float
    iqr_ms: float
    tokens_per_s: float                # batch tokens produced per second
    cache_bytes: int                   # the KV cache actually held at this context


def device_label(dev: torch.device) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return f"cpu ({torch.get_num_threads()} threads)"


def device_profile(dev: torch.device) -> str | None:
    """The DEVICE_PROFILES key for this device: the GPU name contains it, or the measured CPU profile."""
    if dev.type == "cuda":
        gpu = torch.cuda.get_device_name(dev)
        return next((k for k in DEVICE_PROFILES if k != "CPU (measured)" and k in gpu), None)
    return "CPU (measured)" if "CPU (measured)" in DEVICE_PROFILES else None


def peak_flops(profile: str | None, dtype: str) -> float | None:
    if profile is None:
        return None
    peak = DEVICE_PROFILES[profile].peak_flops.get(dtype)
    return peak if peak else None


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


def _check(cfg: ModelConfig, batch: int, seq: int, dtype: str, mode: str = "forward") -> None:
    problems = []
    if not isinstance(batch, int) or batch < 1:
        problems.append(f"batch: {batch!r} is not an integer >= 1")
    if not isinstance(seq, int) or seq < 1:
        problems.append(f"seq: {seq!r} is not an integer >= 1")
    elif cfg.position == "learned" and seq > cfg.context_length:
        problems.append(f"seq: {seq} exceeds context_length={cfg.context_length} (learned positions)")
    if dtype not in TORCH_DTYPES:
        problems.append(f"dtype: {dtype!r} is not one of {', '.join(TORCH_DTYPES)}")
    if mode not in MODES:
        problems.append(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    if problems:
        raise ValueError("; ".join(problems))


def _timing(times: list[float], runs: int) -> Timing:
    q1, _, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else (times[0],) * 3
    return Timing(statistics.median(times), q3 - q1, runs)


def time_fn(fn: Callable[[], object], dev: torch.device, min_run_time: float = 0.3, warmup: int = 2,
            min_samples: int = 5) -> Timing:
    """Median and IQR of fn() in seconds over at least `min_samples` samples, under the process-wide lock."""
    with LOCK:
        for _ in range(warmup):
            fn()
        if dev.type != "cuda":
            timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
            m = timer.blocked_autorange(min_run_time=min_run_time)   # samples are block averages
            times = list(m.times)
            while len(times) < min_samples:
                times.append(timer.timeit(number=m.number_per_run).median)
            return _timing(times, len(times) * m.number_per_run)
        torch.cuda.synchronize(dev)
        times = []
        while sum(times) < min_run_time or len(times) < min_samples:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(dev)
            times.append(start.elapsed_time(end) / 1e3)
        return _timing(times, len(times))


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
    _check(cfg, batch, seq, dtype, mode)
    dev = resolve_device(device)
    check_fits(cfg, dev, batch, seq, dtype, mode == "train")
    model = build_model(cfg, device=dev, dtype=TORCH_DTYPES[dtype])
    model.train(mode == "train")
    return model, dev


def measure(model: DecoderLM, batch: int, seq: int, mode: str = "forward", min_run_time: float = 0.3,
            seed: int = 0) -> LatencyResult:
    """Time one call of `model` on random tokens [batch, seq]; the model's device and dtype are used."""
    cfg = model.cfg
    p = next(model.parameters())
    dtype = dtype_name(p.dtype)
    _check(cfg, batch, seq, dtype, mode)
    dev = p.device
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(cfg.vocab_size, (batch, seq), generator=gen).to(dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    t = time_fn(_step_fn(model, x, mode), dev, min_run_time)
    fb = flops_budget(cfg, batch, seq)
    flops = fb.forward_flops + (fb.backward_flops if mode == "train" else 0)
    achieved = flops / t.median_s
    profile = device_profile(dev)
    peak = peak_flops(profile, dtype)
    return LatencyResult(
        cfg.name, mode, device_label(dev), dtype, batch, seq, t.median_s * 1e3, t.iqr_s * 1e3, t.runs,
        batch * seq / t.median_s, flops, achieved / 1e12, achieved / peak if peak else None, profile,
        torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None)


def check_min_time(min_run_time: float) -> None:
    """Seconds of timing per point: finite and at most MAX_MIN_TIME (nan would never end the loop)."""
    if isinstance(min_run_time, bool) or not isinstance(min_run_time, (int, float)) \
            or not 0 < min_run_time <= MAX_MIN_TIME:
        raise ValueError(f"min_time: {min_run_time!r} is not a number of seconds > 0 and <= {MAX_MIN_TIME:g}")


def measure_latency(cfg: ModelConfig, batch: int, seq: int, dtype: str = "fp32", device: str = "auto",
                    mode: str = "forward", min_run_time: float = 0.3) -> LatencyResult:
    check_min_time(min_run_time)
    model, _ = prepare(cfg, batch, seq, dtype, device, mode)
    return measure(model, batch, seq, mode, min_run_time)


def latency_sweep(cfg: ModelConfig, batches: list[int], seqs: list[int], dtype: str = "fp32",
                  device: str = "auto", mode: str = "forward", min_run_time: float = 0.2,
                  on_point: Callable[[int, int, LatencyResult], None] | None = None,
                  stop: threading.Event | None = None) -> list[LatencyResult]:
    """Every (batch, seq) pair, one model built once; the largest pair is checked against free memory first.
    on_point(done, total, result) after each point; setting `stop` ends the sweep after the current point."""
    check_min_time(min_run_time)
    model, _ = prepare(cfg, max(batches), max(seqs), dtype, device, mode)
    pairs = [(b, s) for b in batches for s in seqs]
    out = []
    for i, (b, s) in enumerate(pairs):
        if stop is not None and stop.is_set():
            break
        out.append(measure(model, b, s, mode, min_run_time))
        if on_point is not None:
            on_point(i + 1, len(pairs), out[-1])
    return out


def attention_variants(cfg: ModelConfig) -> dict[str, ModelConfig]:
    """The same config with MHA, one GQA setting (the config's own, else about a quarter of the heads) and
    MQA: fewer key/value heads mean a smaller cache to read at every decode step."""
    h = cfg.n_heads
    out = {"MHA": cfg.replace(n_kv_heads=None)}
    g = cfg.kv_heads if 1 < cfg.kv_heads < h else max(
        (d for d in range(2, h // 4 + 1) if h % d == 0), default=None)
    if g is not None:
        out[f"GQA-{g}"] = cfg.replace(n_kv_heads=g)
    if h > 1:
        out["MQA"] = cfg.replace(n_kv_heads=1)
    return out


def decode_latency(model: DecoderLM, contexts: list[int], batch: int = 1, min_run_time: float = 0.2,
                   on_point: Callable[[int, int, DecodePoint], None] | None = None,
                   stop: threading.Event | None = None, seed: int = 0) -> list[DecodePoint]:
    """Time one new token with a KV cache already holding `context` tokens, for each context (ascending).

    The cache is filled once and extended between points; after every timed step the layers' (k, v, start)
    are put back (the step concatenates new tensors, never writes in place), so each call sees the same cache."""
    cfg, p = model.cfg, next(model.parameters())
    contexts = sorted(set(contexts))
    if not contexts or contexts[0] < 1:
        raise ValueError(f"contexts: {contexts!r} must be integers >= 1")
    if cfg.position == "learned" and contexts[-1] + 1 > cfg.context_length:
        raise ValueError(f"contexts: {contexts[-1]} + 1 new token exceeds context_length={cfg.context_length}")
    gen = torch.Generator().manual_seed(seed)
    model.eval()
    cache, points = KVCache(cfg.n_layers), []
    tok = torch.randint(cfg.vocab_size, (batch, 1), generator=gen).to(p.device)
    for ctx in contexts:
        if stop is not None and stop.is_set():
            break
        with torch.no_grad():
            model(torch.randint(cfg.vocab_size, (batch, ctx - cache.pos), generator=gen).to(p.device), cache)
        saved, pos = [(layer.k, layer.v, layer.start) for layer in cache.layers], cache.pos

        def step():
            with torch.no_grad():
                model(tok, cache)
            for layer, (k, v, start) in zip(cache.layers, saved):
                layer.k, layer.v, layer.start = k, v, start
            cache.pos = pos

        t = time_fn(step, p.device, min_run_time)
        points.append(DecodePoint(ctx, t.median_s * 1e3, t.iqr_s * 1e3, batch / t.median_s, cache.nbytes()))
        if on_point is not None:
            on_point(len(points), len(contexts), points[-1])
    return points


def measure_decode(cfg: ModelConfig, contexts: list[int], batch: int = 1, dtype: str = "fp32",
                   device: str = "auto", min_run_time: float = 0.2, **kw) -> list[DecodePoint]:
    """Refuse what would not fit at the longest context, build, then decode_latency."""
    model, _ = prepare(cfg, batch, max(contexts) + 1, dtype, device, "forward")
    return decode_latency(model, contexts, batch, min_run_time, **kw)
