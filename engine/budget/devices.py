"""Accelerator profiles (published dense peaks and memory bandwidth) and a roofline verdict.

Peaks are dense (no 2:4 sparsity) tensor-core figures from the vendors' datasheets/whitepapers:
H100 SXM5 989.4 TFLOP/s bf16, 3.35 TB/s HBM3; H200 SXM 989.4 TFLOP/s, 4.8 TB/s HBM3e; A100 SXM4 80GB
312 TFLOP/s, 2.039 TB/s; RTX 4090 165.2 TFLOP/s bf16 with fp32 accumulate (Ada whitepaper), 1.008 TB/s.
"this CPU" is measured (engine.measure.probe): matmul probes for the peak per dtype, copies for the bandwidth.
A kernel is compute-bound when its FLOPs per byte exceed the ridge point peak / bandwidth.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.budget.flops import arithmetic_intensity
from engine.config import ModelConfig
from engine.measure.probe import machine_bandwidth, machine_peaks
from engine.validation import choice_problem, require


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    peak_flops: dict[str, float]     # dtype -> dense FLOP/s
    mem_bandwidth: float             # bytes/s
    memory_bytes: int | None = None  # on-device memory, None when it is the host's
    source: str = ""

    def ridge(self, dtype: str = "bf16") -> float:
        """FLOPs per byte at which compute time equals memory time."""
        return self.peak_flops[dtype] / self.mem_bandwidth


class MeasuredCPU(DeviceProfile):
    """The host CPU: peak per dtype and bandwidth probed (engine.measure.probe), kept per process and on disk."""

    def __init__(self) -> None:
        object.__setattr__(self, "name", "CPU (measured)")      # memory_bytes keeps its default None: the host's
        object.__setattr__(self, "source", "measured on this machine: the best of short matmul probes per dtype "
                                           "(peak) and of 64 MiB copies (bandwidth), stored in "
                                           "$EXPLORER_HOME/peaks.json")

    @property
    def peak_flops(self) -> dict[str, float]:
        return machine_peaks("cpu")           # the probe's own dict: a raised peak shows here too

    @property
    def mem_bandwidth(self) -> float:
        return machine_bandwidth("cpu")


def _gpu(name: str, bf16: float, fp32: float, bandwidth: float, memory_gb: float, source: str) -> DeviceProfile:
    return DeviceProfile(name, {"bf16": bf16, "fp16": bf16, "fp32": fp32}, bandwidth, int(memory_gb * 1e9), source)


DEVICE_PROFILES: dict[str, DeviceProfile] = {
    "H100": _gpu("H100", 989.4e12, 66.9e12, 3.35e12, 80, "NVIDIA H100 SXM5 datasheet"),
    "H200": _gpu("H200", 989.4e12, 66.9e12, 4.8e12, 141, "NVIDIA H200 SXM datasheet"),
    "A100": _gpu("A100", 312e12, 19.5e12, 2.039e12, 80, "NVIDIA A100 SXM4 80GB datasheet"),
    "RTX 4090": _gpu("RTX 4090", 165.2e12, 82.6e12, 1.008e12, 24, "NVIDIA Ada Lovelace whitepaper"),
    "CPU (measured)": MeasuredCPU(),
}


@dataclass(frozen=True)
class Roofline:
    device: str
    phase: str
    flops_per_byte: float
    ridge: float                 # device FLOPs per byte where the roofs meet
    attainable_flops: float      # min(peak, intensity * bandwidth)
    time_s: float                # max(FLOPs / peak, bytes / bandwidth)
    bound: str                   # "compute" or "memory"

    @property
    def verdict(self) -> str:
        return (f"{self.phase} on {self.device}: {self.bound}-bound "
                f"({fmt_ratio(self.flops_per_byte)} FLOP/B vs ridge {fmt_ratio(self.ridge)} FLOP/B)")


def fmt_ratio(x: float) -> str:
    """FLOPs per byte: whole numbers with separators from 10 up, two significant digits below (a slow CPU's
    ridge of 0.24 must not read 0)."""
    return f"{x:,.0f}" if x >= 10 else f"{x:.2g}"


def roofline(cfg: ModelConfig, device: str, batch: int, seq: int, dtype: str = "bf16") -> dict[str, Roofline]:
    """Prefill and one decode step placed on the roofline of DEVICE_PROFILES[device]."""
    require(choice_problem("device", device, DEVICE_PROFILES))
    return roofline_on(cfg, DEVICE_PROFILES[device], batch, seq, dtype)


def roofline_on(cfg: ModelConfig, prof: DeviceProfile, batch: int, seq: int,
                dtype: str = "bf16") -> dict[str, Roofline]:
    """Prefill and one decode step placed on the roofline of `prof`."""
    peak, bw = prof.peak_flops[dtype], prof.mem_bandwidth
    out = {}
    for phase, it in arithmetic_intensity(cfg, batch, seq, dtype).items():
        i = it.flops_per_byte
        out[phase] = Roofline(device=prof.name, phase=phase, flops_per_byte=i, ridge=peak / bw,
                              attainable_flops=min(peak, i * bw), time_s=max(it.flops / peak, it.bytes / bw),
                              bound="compute" if i >= peak / bw else "memory")
    return out
