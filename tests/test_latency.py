"""Measured latency on tiny CPU models: timing statistics, FLOP/s and MFU bookkeeping, decode with a KV cache,
the process-wide lock, refusals, and the `bench` CLI."""
from __future__ import annotations

import dataclasses
import json
import threading
import time

import pytest
import torch

import engine.guard
import engine.measure.latency as lat
from engine.budget.devices import DEVICE_PROFILES
from engine.budget.flops import flops_budget
from engine.budget.memory import kv_cache_bytes
from engine.cli import main
from engine.config import ModelConfig
from engine.guard import MemoryRefusal
from app import latency_plan as plan
from engine.measure.decode import decode_latency, measure_decode
from engine.model import build_model
from engine.presets import get_preset

TINY = ModelConfig(name="tiny", vocab_size=64, context_length=64, d_model=32, n_layers=2, n_heads=4,
                   ffn_multiple_of=8)


def test_time_fn_measures_wall_time_with_the_real_thread_count(monkeypatch):
    """On an idle machine every thread times; when other processes keep the cores busy, only the free ones
    (at least one), and the count is restored afterwards."""
    import os
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    threads = []

    def fn():
        threads.append(torch.get_num_threads())
        time.sleep(0.01)

    t = lat.time_fn(fn, torch.device("cpu"), budget_s=0.05)
    # wall time, not CPU time (a sleep uses none), in seconds; a loaded machine may wake the sleeper late, so
    # the upper bound only rules out a wrong unit (10 ms read as 10.0)
    assert 0.0095 <= t.median_s < 1.0 and t.iqr_s >= 0 and t.runs >= 5
    assert set(threads) == {torch.get_num_threads()}
    monkeypatch.setattr(os, "getloadavg", lambda: (50.0, 50.0, 50.0))
    threads.clear()
    lat.time_fn(fn, torch.device("cpu"), budget_s=0.02)
    assert set(threads) == {1} and torch.get_num_threads() >= 1


@pytest.mark.parametrize("mode", lat.MODES)
def test_forward_and_train_results_are_consistent(mode):
    r = lat.measure_latency(TINY, 2, 16, device="cpu", mode=mode, budget_s=0.05)
    fb = flops_budget(TINY, 2, 16)
    assert r.flops == fb.forward_flops + (fb.backward_flops if mode == "train" else 0)
    assert r.median_ms > 0 and r.iqr_ms >= 0 and r.runs >= 5
    assert r.tokens_per_s == pytest.approx(2 * 16 / (r.median_ms / 1e3))
    assert r.achieved_tflops == pytest.approx(r.flops / (r.median_ms / 1e3) / 1e12)
    assert r.profile == "CPU (measured)"
    assert r.mfu == pytest.approx(r.achieved_tflops * 1e12 / DEVICE_PROFILES["CPU (measured)"].peak_flops["fp32"])
    assert r.peak_memory_bytes is None and "threads" in r.device
    assert {"median_ms", "iqr_ms", "tokens_per_s", "achieved_tflops", "mfu"} <= set(r.as_dict())


def test_bf16_timing_runs_in_bf16():
    model, _ = lat.prepare(TINY, 1, 8, "bf16", "cpu")
    assert next(model.parameters()).dtype == torch.bfloat16
    assert lat.measure(model, 1, 8, budget_s=0.02).dtype == "bf16"


def test_the_lock_serialises_timing():
    done = threading.Event()
    worker = threading.Thread(target=lambda: (lat.time_fn(lambda: None, torch.device("cpu"), 0.01), done.set()))
    with lat.LOCK:
        worker.start()
        assert not done.wait(0.3)      # blocked while someone else is timing
    worker.join(30)
    assert done.is_set()


def test_refuses_before_building_with_the_numbers(monkeypatch):
    monkeypatch.setattr(engine.guard, "free_bytes", lambda device: 2**20)
    monkeypatch.setattr(lat, "build_model", lambda *a, **k: pytest.fail("built a model that does not fit"))
    with pytest.raises(MemoryRefusal, match=r"refusing to build tiny .* needs about .* but only 1.00 MiB"):
        lat.prepare(TINY.replace(vocab_size=50_000), 8, 64, "fp32", "cpu")


@pytest.mark.parametrize("kw, field", [(dict(batch=0), "batch"), (dict(seq=65), "seq"), (dict(dtype="fp64"), "dtype"),
                                       (dict(mode="decode"), "mode")])
def test_bad_input_names_the_field(kw, field):
    args = dict(batch=1, seq=8, dtype="fp32", device="cpu", mode="forward") | kw
    with pytest.raises(ValueError, match=f"^{field}: "):
        lat.prepare(TINY, **args)


@pytest.mark.parametrize("cfg", [TINY, TINY.replace(n_kv_heads=1), TINY.replace(attn_window=8, global_every=2)])
def test_decode_holds_exactly_the_closed_form_cache(cfg):
    """The timed step's new key/value is put back each time: the cache stays at `context` tokens."""
    points = measure_decode({"v": cfg}, [32, 4, 16], device="cpu", budget_s=0.06)["v"]
    assert [p.context for p in points] == [4, 16, 32]
    for p in points:
        assert p.cache_bytes == kv_cache_bytes(cfg, 1, p.context, "fp32")
        assert p.median_ms > 0 and p.tokens_per_s == pytest.approx(1e3 / p.median_ms)


def test_decode_rejects_contexts_past_learned_positions():
    with pytest.raises(ValueError, match="contexts: 64 \\+ 1 new token exceeds context_length=64"):
        decode_latency(build_model(TINY), [8, 64])


def test_sweep_reports_progress_per_round_and_stops():
    """Interleaved rounds: after each round every point has one more sample; `stop` ends after that round."""
    stop, seen = threading.Event(), []

    def on_round(p, results):
        seen.append((p.rounds, [(r.batch, r.seq, r.runs) for r in results]))
        if p.rounds == 2:
            stop.set()

    out = lat.latency_sweep(TINY, [2, 1], [16, 8], device="cpu", budget_s=30, on_round=on_round, stop=stop,
                            target_spread=0.0)
    assert seen == [(1, [(1, 8, 1), (1, 16, 1), (2, 8, 1), (2, 16, 1)]),
                    (2, [(1, 8, 2), (1, 16, 2), (2, 8, 2), (2, 16, 2)])]
    assert [(r.batch, r.seq, r.runs) for r in out] == seen[-1][1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_reports_peak_memory():
    r = lat.measure_latency(TINY, 2, 16, device="cuda", budget_s=0.05)
    assert r.peak_memory_bytes > 0 and "threads" not in r.device


def test_bench_cli(capsys):
    assert main(["bench", "--preset", "nanogpt-handout", "--seq", "4", "--time-budget", "0.02", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["name"] == "nanogpt-handout" and r["seq"] == 4 and r["median_ms"] > 0 and 0 < r["mfu"]
    assert main(["bench", "--preset", "nanogpt-handout", "--seq", "4", "--time-budget", "0.02"]) == 0
    assert "tokens/s" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--preset", "llama-3-70b", "--batch", "8", "--seq", "8192"], "error: refusing to build llama-3-70b"),
    (["--preset", "gpt2", "--seq", "2000"], "error: seq: 2000 exceeds context_length=1024"),
    (["--preset", "gpt2", "--dtype", "int8"], "error: dtype: 'int8' is not one of fp32, bf16, fp16"),
])
def test_bench_cli_refuses_with_a_message(capsys, argv, message):
    assert main(["bench", *argv, "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and "Traceback" not in err


def test_memory_estimate_is_the_closed_form_of_what_is_timed():
    from engine.budget.memory import memory_budget
    b = memory_budget(TINY, 2, 16, "bf16", "bf16")
    fwd, how_f = lat.memory_estimate(TINY, 2, 16, "bf16", "forward")
    trn, how_t = lat.memory_estimate(TINY, 2, 16, "bf16", "train")
    assert fwd == b.weights_bytes + 2 * 16 * 64 * 2 and "logits" in how_f
    assert trn == b.weights_bytes + b.grads_bytes + b.activations_bytes and "gradients" in how_t


def test_memory_check_is_the_estimate_beside_the_measured_peak():
    r = lat.measure_latency(TINY, 2, 16, device="cpu", budget_s=0.02)
    assert lat.memory_check(TINY, r) is None                            # CPU: nothing measured, no invented gap
    est = lat.memory_estimate(TINY, 2, 16)[0]
    m = lat.memory_check(TINY, dataclasses.replace(r, peak_memory_bytes=est // 2))
    assert (m.estimate, m.measured) == (est, est // 2)
    assert m.error_pct == pytest.approx(100.0 * (est - est // 2) / (est // 2))   # the Budgets page's sign
    assert "max_memory_allocated" in m.method and "logits" in m.method


def test_sweep_and_decode_choices():
    assert plan.powers_of_two(8, 100) == [8, 16, 32, 64] and plan.powers_of_two(8, 4) == []
    assert plan.batch_choices() == [1, 2, 4, 8, 16, 32, 64]
    cpu = torch.device("cpu")
    assert plan.seq_choices(TINY) == [8, 16, 32, 64] and plan.default_sweep(TINY, cpu, "fp32", "forward") == (
        [1, 4], [32])
    assert plan.seq_choices(TINY.replace(context_length=5)) == [5] and plan.default_sweep(TINY.replace(
        context_length=16), cpu, "fp32", "forward") == ([1, 4], [8, 16])
    gpt2 = get_preset("gpt2").config
    assert plan.decode_contexts(gpt2, "cpu") == [16, 32, 64, 128, 256, 512]      # 1,024 needs position 1,025
    assert plan.decode_contexts(gpt2.replace(context_length=8192), "cuda")[-1] == 4096
    assert plan.decode_contexts(TINY.replace(context_length=16), "cpu") == [1, 2, 4, 8]
    assert plan.decode_contexts(TINY.replace(context_length=1), "cpu") == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="on CUDA the script measures for minutes (run it by hand)")
def test_gpu_checks_skip_cleanly_without_cuda(capsys):
    from bench.gpu_checks import main as gpu_main
    assert gpu_main() == 0 and "CUDA is not available on this machine; skipped" in capsys.readouterr().out
