"""The guard's estimate is never below the measured peak of the path it approves.

Measured: torch's CPU allocator, through the profiler's memory events (engine.measure.peak.allocator_peak):
every tensor and kernel workspace allocated while the path runs, model build included, peak of the running sum.
Paths: the real training run (engine.train.loop.train, one step, with eval and sampling) and the forward pass
the latency page times, on a grid of variants with both attention paths.
"""
import pytest
import torch

from engine.guard import needed_bytes
from engine.measure.latency import _step_fn, prepare
from engine.measure.peak import allocator_peak
from tests.helpers import variant_configs
from engine.train.data import load_text
from engine.train.loop import TrainConfig, model_for, train

GRID = variant_configs()[:8]
TEXT = "".join(chr(97 + (i * 7) % 23) for i in range(6000))


def _sized(cfg, **kw):
    return cfg.replace(**{**dict(d_model=32, n_heads=4, context_length=64, vocab_size=50), **kw})


@pytest.mark.parametrize("impl", ["sdpa", "explicit"])
@pytest.mark.parametrize("i", range(len(GRID)))
def test_training_run_peak_is_below_the_guard(i, impl):
    cfg = _sized(GRID[i], attn_softcap=GRID[i].attn_softcap if impl == "sdpa" else 4.0)
    data = load_text(TEXT)
    tc = TrainConfig(steps=1, batch=4, seq=48, eval_batches=1, samples=0, eval_every=1)
    peak = allocator_peak(lambda: train(cfg, tc, data, device="cpu"))
    estimate = needed_bytes(model_for(cfg, data, tc), tc.batch, tc.seq, "fp32", training=True, attention=impl)
    assert 0 < peak <= estimate, (GRID[i], peak, estimate)


@pytest.mark.parametrize("mode", ["forward", "train"])
@pytest.mark.parametrize("impl", ["sdpa", "explicit"])
@pytest.mark.parametrize("i", range(len(GRID)))
def test_latency_pass_peak_is_below_the_guard(i, impl, mode):
    cfg = _sized(GRID[i])
    B, T = 3, 64

    def run():
        model, _ = prepare(cfg, B, T, "fp32", "cpu", mode)
        model.set_attention(impl)
        x = torch.randint(cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(0))
        _step_fn(model, x, mode)()

    peak = allocator_peak(run)
    assert 0 < peak <= needed_bytes(cfg, B, T, "fp32", training=mode == "train", attention=impl), (GRID[i], peak)


def test_explicit_scores_dominate_and_are_counted():
    """The issue's case at a CPU-friendly size: many tiny heads on the soft-cap path; the T x T scores are
    most of the peak, so an estimate without them would be far below it."""
    cfg = TINY_SCORES = _sized(GRID[0], n_heads=64, head_dim=1, d_model=16, attn_softcap=50.0, n_layers=1,
                                n_kv_heads=None, attn_window=None, global_every=None, position="learned")
    B, T = 2, 64

    def run():
        model, _ = prepare(cfg, B, T, "fp32", "cpu", "forward")
        _step_fn(model, torch.zeros(B, T, dtype=torch.long), "forward")()

    peak = allocator_peak(run)
    scores = B * cfg.n_heads * T * T * 4
    assert scores < peak <= needed_bytes(TINY_SCORES, B, T, "fp32", training=False)
