"""The device table: each GPU profile holds its datasheet figures (bf16 and fp16 share the dense tensor-core
peak; memory in decimal GB), the ridge point is peak / bandwidth, and the host CPU is the measured profile."""
from __future__ import annotations

from engine.budget.devices import DEVICE_PROFILES, DeviceProfile, MeasuredCPU, _gpu
from engine.measure.probe import machine_bandwidth, machine_peaks

# name: (dense bf16 FLOP/s, fp32 FLOP/s, bytes/s, GB), the figures the module docstring cites
DATASHEETS = {"H100": (989.4e12, 66.9e12, 3.35e12, 80), "H200": (989.4e12, 66.9e12, 4.8e12, 141),
              "A100": (312e12, 19.5e12, 2.039e12, 80), "RTX 4090": (165.2e12, 82.6e12, 1.008e12, 24)}


def test_gpu_profiles_hold_their_datasheet_figures():
    for name, (bf16, fp32, bandwidth, gb) in DATASHEETS.items():
        source = DEVICE_PROFILES[name].source
        expected = DeviceProfile(name, {"bf16": bf16, "fp16": bf16, "fp32": fp32}, bandwidth, gb * 10**9, source)
        assert DEVICE_PROFILES[name] == expected
        assert _gpu(name, bf16, fp32, bandwidth, gb, source) == expected
        assert type(expected.memory_bytes) is int and source.startswith("NVIDIA ")


def test_ridge_is_peak_over_bandwidth_in_the_asked_dtype():
    h100 = DEVICE_PROFILES["H100"]
    assert h100.ridge() == h100.ridge("bf16") == 989.4e12 / 3.35e12          # bf16 by default
    assert h100.ridge("fp32") == 66.9e12 / 3.35e12


def test_the_host_cpu_profile_reads_the_probe():
    cpu = MeasuredCPU()
    assert vars(cpu) == {"name": "CPU (measured)",
                         "source": "measured on this machine: the best of short matmul probes per dtype (peak) and "
                                   "of 64 MiB copies (bandwidth), stored in $EXPLORER_HOME/peaks.json"}
    assert cpu.memory_bytes is None                                          # the host's memory, not a device's
    assert cpu.peak_flops is machine_peaks("cpu") and cpu.mem_bandwidth == machine_bandwidth("cpu")
    assert cpu.ridge("fp32") == machine_peaks("cpu")["fp32"] / machine_bandwidth("cpu")
