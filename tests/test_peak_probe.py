"""The peak probe (matmul timing, cached per process and on disk) and MFU, which can never exceed 100%."""
from __future__ import annotations

import json
import re

import pytest
import torch

import engine.measure.latency as lat
from engine.budget.devices import DEVICE_PROFILES
from engine.cli import main
from engine.config import ModelConfig
from engine.measure import probe

CPU = torch.device("cpu")
TINY = ModelConfig(name="tiny", vocab_size=64, context_length=64, d_model=32, n_layers=2, n_heads=4)


@pytest.fixture
def real_probe(monkeypatch):
    """Undo conftest's pinned peaks: this process probes, and reads/writes $EXPLORER_HOME/peaks.json."""
    monkeypatch.setattr(probe, "_CACHE", {})


def test_probe_times_every_dtype_and_stores_it(real_probe, monkeypatch):
    peaks = probe.machine_peaks(CPU)
    assert set(peaks) == {"fp32", "bf16", "fp16"} and all(v > 0 for v in peaks.values())
    assert probe.machine_bandwidth(CPU) > 1e8                  # even a loaded machine copies > 100 MB/s
    stored = json.loads(probe.store_path().read_text())[probe.machine_key(CPU)]
    assert stored == {"peak": peaks, "bandwidth": probe.machine_bandwidth(CPU)}
    # a new process reads the file instead of probing again
    monkeypatch.setattr(probe, "_CACHE", {})
    monkeypatch.setattr(probe, "probe_matmul", lambda *a: pytest.fail("probed although a stored peak exists"))
    assert probe.machine_peaks(CPU) == peaks
    assert DEVICE_PROFILES["CPU (measured)"].peak_flops is probe.machine_peaks(CPU)


def threads_of(r: lat.LatencyResult) -> int:
    """The threads a CPU result was timed with ("cpu (timing threads: 1 of 2)"): its peak is that count's."""
    return int(re.search(r"timing threads: (\d+)", r.device).group(1))


def wrong_peak(fp32: float) -> None:
    """Every thread count's stored fp32 peak (timing may use fewer threads than torch's count on a busy machine)."""
    for entry in probe._CACHE.values():
        entry["peak"]["fp32"] = fp32


def test_mfu_is_never_above_100_percent(monkeypatch):
    """A peak below what the model achieves (a probe run on a busy machine) gives no MFU and says why; the
    stored peak is raised to the work the model provably did (causal FLOPs / time) for later readings."""
    wrong_peak(1.0)                                            # 1 FLOP/s: every model beats it
    r = lat.measure_latency(TINY, 2, 16, device="cpu", budget_s=0.02)
    assert r.mfu is None and r.mfu_text == "peak estimate is wrong" and r.peak_flops == 1.0
    raised = probe.machine_peaks(CPU, threads_of(r))["fp32"]
    assert 1.0 < raised <= r.achieved_tflops * 1e12             # raised, never above what was achieved
    again = lat.measure_latency(TINY, 2, 16, device="cpu", budget_s=0.02)
    assert again.mfu is None or 0 < again.mfu <= 1


def test_mfu_reading_against_the_real_probe(real_probe):
    r = lat.measure_latency(TINY, 2, 16, device="cpu", budget_s=0.05)
    assert r.profile == "CPU (measured)" and 0 < r.peak_flops <= probe.machine_peaks(CPU, threads_of(r))["fp32"]
    if r.mfu is None:                       # the probe ran on a busier machine than this measurement
        assert r.mfu_text == "peak estimate is wrong" and r.achieved_tflops * 1e12 > r.peak_flops
    else:
        assert 0 < r.mfu <= 1 and r.mfu == pytest.approx(r.achieved_tflops * 1e12 / r.peak_flops)
    assert lat.mfu(2.0, 1.0) is None and lat.mfu(1.0, 2.0) == 0.5 and lat.mfu(1.0, None) is None


def test_bench_cli_says_the_peak_is_wrong_instead_of_printing_it(capsys):
    wrong_peak(1.0)
    assert main(["bench", "--preset", "nanogpt-handout", "--seq", "4", "--time-budget", "0.02"]) == 0
    out = capsys.readouterr().out
    assert "peak estimate is wrong" in out and "MFU" in out and "%" not in out.split("TFLOP/s")[-1]


def test_roofline_uses_the_measured_peak_and_bandwidth():
    from app.charts import budgets as budget_charts
    from engine.budget.devices import DeviceProfile, roofline, roofline_on
    cpu = DEVICE_PROFILES["CPU (measured)"]
    points = roofline(TINY, "CPU (measured)", 1, 32, "fp32")
    assert points["decode"].ridge == cpu.peak_flops["fp32"] / cpu.mem_bandwidth == 10.0     # conftest's pins
    fig = budget_charts.roofline_figure(cpu, points, "fp32")
    ridge_label = lambda f: [a.text for a in f.layout.annotations if a.text.startswith("ridge ")]  # noqa: E731
    assert ridge_label(fig) == ["ridge 10 FLOP/B"]
    slow = DeviceProfile("slow CPU", {"fp32": 2.86e9}, 12e9)          # the "ridge 0 FLOP/B"
    fig = budget_charts.roofline_figure(slow, roofline_on(TINY, slow, 1, 32, "fp32"), "fp32")
    assert ridge_label(fig) == ["ridge 0.24 FLOP/B"]
