"""The device table: each profile holds the figures its datasheet prints (dense tensor peaks per dtype, bf16 and fp16
at one rate; memory in binary units, as HBM and GDDR are built; bandwidth in decimal bytes/s), the ridge point is
peak / bandwidth, Apple's unified memory keeps the OS's share out, and the host CPU is the measured profile."""
from __future__ import annotations

import pytest

from engine.budget.devices import DEVICE_PROFILES, GPUS, MeasuredCPU
from engine.measure.probe import machine_bandwidth, machine_peaks

GiB = 2**30
# name: (GiB, bytes/s, dense TFLOPS per dtype), as the profile's source prints them (sparse figures halved)
DATASHEETS = {
    "H100": (80, 3.35e12, {"bf16": 989.4, "fp8": 1978.9, "fp32": 66.9}),
    "H200": (141, 4.8e12, {"bf16": 989.4, "fp8": 1978.9, "fp32": 66.9}),
    "B200": (180, 8.0e12, {"bf16": 2250, "fp8": 4500, "fp4": 9000}),
    "A100": (80, 2.039e12, {"bf16": 312, "fp32": 19.5}),
    "A100 40GB": (40, 1.555e12, {"bf16": 312}),
    "L40S": (48, 864e9, {"bf16": 362.05, "fp8": 733, "fp32": 91.6}),
    "L4": (24, 300e9, {"bf16": 242 / 2, "fp8": 485 / 2}),
    "A10G": (24, 600e9, {"bf16": 70}),
    "RTX 3090": (24, 936e9, {"bf16": 71}),
    "RTX 4090": (24, 1.008e12, {"bf16": 165.2, "fp8": 330.3, "fp32": 82.6}),
    "RTX 5090": (32, 1.792e12, {"bf16": 838.4 / 4, "fp8": 1676.8 / 4, "fp4": 3352 / 2}),
    "MI300X": (192, 5.3e12, {"bf16": 1307.4, "fp8": 2614.9}),
}


@pytest.mark.parametrize("name", sorted(DATASHEETS))
def test_gpu_profiles_hold_their_datasheet_figures(name):
    gib, bandwidth, peaks = DATASHEETS[name]
    dev = DEVICE_PROFILES[name]
    assert dev.memory_bytes == gib * GiB and type(dev.memory_bytes) is int
    assert dev.mem_bandwidth == bandwidth and dev.source
    for dtype, tflops in peaks.items():
        assert dev.peak_flops[dtype] == pytest.approx(tflops * 1e12, rel=1e-3)
    assert dev.peak_flops["fp16"] == dev.peak_flops["bf16"]
    assert GPUS[dev.key] == name


def test_apple_unified_memory_keeps_the_os_share():
    """Metal's recommendedMaxWorkingSetSize on 64 GB and larger Macs is 3/4 of RAM (llama.cpp logs 73728 MB of a
    96 GB M2 Max)."""
    assert 73728 / (96 * 1024) == 0.75
    for name, ram in (("Apple M2 Ultra", 192), ("Apple M4 Max", 128)):
        dev = DEVICE_PROFILES[name]
        assert dev.usable_share == 0.75 and dev.memory_bytes == ram * GiB * 3 // 4
    assert DEVICE_PROFILES["Apple M2 Ultra"].mem_bandwidth == 800e9
    assert DEVICE_PROFILES["Apple M4 Max"].mem_bandwidth == 546e9


def test_torch_device_names_find_their_profile():
    """engine.measure.latency finds a GPU's peak by the substring torch reports; L40S must not read as L4."""
    names = {"NVIDIA L40S": "L40S", "NVIDIA L4": "L4", "NVIDIA A100-SXM4-40GB": "A100",
             "NVIDIA GeForce RTX 4090": "RTX 4090", "NVIDIA H100 80GB HBM3": "H100", "NVIDIA A10G": "A10G"}
    for torch_name, want in names.items():
        assert next(k for k, p in DEVICE_PROFILES.items() if p.match and p.match in torch_name) == want


def test_ridge_is_peak_over_bandwidth_in_the_asked_dtype():
    h100 = DEVICE_PROFILES["H100"]
    assert h100.ridge() == h100.ridge("bf16") == 989.4e12 / 3.35e12          # bf16 by default
    assert h100.ridge("fp32") == 66.9e12 / 3.35e12


def test_the_host_cpu_profile_reads_the_probe():
    cpu = MeasuredCPU()
    assert vars(cpu) == {"name": "CPU (measured)",
                         "source": "measured on this machine: the best of short matmul probes per dtype (peak) and "
                                   "of 64 MiB copies (bandwidth), stored in $EXPLORER_HOME/peaks.json"}
    assert cpu.memory_bytes is None and not cpu.key                          # the host's memory, not a device's
    assert cpu.peak_flops is machine_peaks("cpu") and cpu.mem_bandwidth == machine_bandwidth("cpu")
    assert cpu.ridge("fp32") == machine_peaks("cpu")["fp32"] / machine_bandwidth("cpu")


def test_a_datasheet_row_becomes_a_profile_in_bytes_and_flops():
    """The GPU table is written in datasheet units (engine/budget/devices.py `_gpu`): GiB of memory times the share
    the OS leaves usable, bytes/s, dense TFLOP/s read as decimal text (66.9 TFLOP/s is 66.9e12 exactly, where
    66.9 * 1e12 is 66900000000000.01), and fp16 at the bf16 rate unless the sheet says otherwise."""
    from engine.budget.devices import GiB, _gpu
    p = _gpu("Test GPU", "test", 96, 4.0e12, "a datasheet", usable_share=0.75, bf16=66.9, fp32=33.5)
    assert (p.name, p.key, p.match, p.source, p.usable_share) == ("Test GPU", "test", "Test GPU", "a datasheet", 0.75)
    assert p.memory_bytes == 72 * GiB and p.mem_bandwidth == 4.0e12
    assert p.peak_flops == {"bf16": 66.9e12, "fp32": 33.5e12, "fp16": 66.9e12} and p.peak_flops["bf16"] != 66.9 * 1e12
    own = _gpu("Other", "other", 1, 1.0, "", match="Other PCIe", bf16=2, fp16=4)
    assert own.match == "Other PCIe" and own.peak_flops["fp16"] == 4e12 and own.memory_bytes == GiB
