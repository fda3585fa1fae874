"""Measured decode: one new token with a KV cache already holding `context` tokens, for MHA, GQA and MQA side by
side. The variants are timed in interleaved rounds at every context (engine.measure.rounds), so a burst of load
hits all of them; each cache is filled once and extended from one context to the next."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import torch

from engine.config import ModelConfig
from engine.guard import HEADROOM, MemoryRefusal, check_fits, free_bytes, needed_bytes
from engine.measure.latency import check_request
from engine.measure.rounds import NOISY_SPREAD, TARGET_SPREAD, interleaved, timing_session
from engine.model import DecoderLM, KVCache, build_model
from engine.runtime import TORCH_DTYPES, resolve_device
from engine.units import fmt_bytes


@dataclass(frozen=True)
class DecodePoint:
    context: int
    median_ms: float
    iqr_ms: float
    tokens_per_s: float                # batch tokens produced per second
    cache_bytes: int                   # the KV cache actually held at this context

    @property
    def noisy(self) -> bool:
        return self.median_ms > 0 and self.iqr_ms / self.median_ms > NOISY_SPREAD


def _decode_step(model: DecoderLM, cache: KVCache, tok: torch.Tensor) -> Callable[[], None]:
    """One new token on top of `cache`; afterwards each layer's tensors (keys, values, a recurrent state) are put
    back (the step builds new tensors, never writes in place), so every call sees the same cache."""
    saved, pos = [dict(vars(layer)) for layer in cache.layers], cache.pos

    def step():
        with torch.no_grad():
            model(tok, cache)
        for layer, held in zip(cache.layers, saved):
            vars(layer).update(held)
        cache.pos = pos
    return step


def decode_curves(models: dict[str, DecoderLM], contexts: list[int], batch: int = 1, budget_s: float = 1.0,
                  on_point: Callable[[int, int, dict[str, list[DecodePoint]]], None] | None = None,
                  stop: threading.Event | None = None, seed: int = 0,
                  target_spread: float = TARGET_SPREAD) -> dict[str, list[DecodePoint]]:
    """Time one new token with a KV cache already holding `context` tokens, for each context (ascending) and
    each model, the models timed in interleaved rounds at every context (budget_s shared by the contexts).
    Each cache is filled once and extended between contexts. on_point(done, total, the curves so far)."""
    contexts = sorted(set(contexts))
    if not contexts or contexts[0] < 1:
        raise ValueError(f"contexts: {contexts!r} is not a list of integers >= 1")
    for model in models.values():
        if model.cfg.position == "learned" and contexts[-1] + 1 > model.cfg.context_length:
            raise ValueError(f"contexts: {contexts[-1]} + 1 new token exceeds "
                             f"context_length={model.cfg.context_length}")
    gen = torch.Generator().manual_seed(seed)
    caches = {k: KVCache(m.cfg.n_layers) for k, m in models.items()}
    dev = next(next(iter(models.values())).parameters()).device
    tok = torch.randint(min(m.cfg.vocab_size for m in models.values()), (batch, 1), generator=gen).to(dev)
    curves: dict[str, list[DecodePoint]] = {k: [] for k in models}
    with timing_session(dev):
        for i, ctx in enumerate(contexts):
            if stop is not None and stop.is_set():
                break
            steps = []
            for label, model in models.items():
                model.eval()
                cache = caches[label]
                new = torch.randint(model.cfg.vocab_size, (batch, ctx - cache.pos), generator=gen).to(dev)
                with torch.no_grad():
                    model(new, cache)
                steps.append(_decode_step(model, cache, tok))
            timings = interleaved(steps, dev, budget_s / len(contexts), target_spread=target_spread)
            for label, t in zip(models, timings):
                curves[label].append(DecodePoint(ctx, t.median_s * 1e3, t.iqr_s * 1e3, batch / t.median_s,
                                                 caches[label].nbytes()))
            if on_point is not None:
                on_point(i + 1, len(contexts), curves)
    return curves


def decode_latency(model: DecoderLM, contexts: list[int], batch: int = 1, budget_s: float = 1.0,
                   **kw) -> list[DecodePoint]:
    """decode_curves for one model."""
    return decode_curves({"": model}, contexts, batch, budget_s, **kw)[""]


def measure_decode(variants: dict[str, ModelConfig], contexts: list[int], batch: int = 1, dtype: str = "fp32",
                   device: str = "auto", budget_s: float = 1.0, **kw) -> dict[str, list[DecodePoint]]:
    """Refuse what would not fit at the longest context (check_decode_fits), build every variant, then
    decode_curves."""
    dev = check_decode_fits(variants, contexts, batch, dtype, device)
    with timing_session(dev):        # building on CPU also runs faster on the threads that have a core
        models = {k: build_model(cfg, device=dev, dtype=TORCH_DTYPES[dtype]) for k, cfg in variants.items()}
        return decode_curves(models, contexts, batch, budget_s, **kw)


def check_decode_fits(variants: dict[str, ModelConfig], contexts: list[int], batch: int = 1, dtype: str = "fp32",
                      device: str | torch.device = "auto") -> torch.device:
    """MemoryRefusal, with the numbers, when a variant or all of them side by side would not fit at the longest
    context (asked before anything is built, so a page can say it before offering the button); else the device."""
    dev, tokens = resolve_device(device), max(contexts) + 1
    for cfg in variants.values():
        check_request(cfg, batch, tokens, dtype)
        check_fits(cfg, dev, batch, tokens, dtype, training=False)
    need, free = sum(needed_bytes(c, batch, tokens, dtype, False) for c in variants.values()), free_bytes(dev)
    if need > HEADROOM * free:
        raise MemoryRefusal(f"refusing to build {', '.join(variants)} side by side on {dev}: together they need "
                            f"about {fmt_bytes(need)} at {tokens:,} tokens in {dtype}, but only {fmt_bytes(free)} "
                            f"is free ({int(HEADROOM * 100)}% usable)", need, free)
    return dev
