"""Accelerator profiles (published dense peaks per dtype, memory and its bandwidth) and a roofline verdict.

Peaks are dense (no 2:4 sparsity) tensor-core figures from the vendors' datasheets and whitepapers, per dtype
(bf16 = fp16 where the part runs them at one rate; GeForce cards at their fp32-accumulate rate, half the fp16-
accumulate one); each profile names its source. Memory is the capacity the datasheet names, in binary units (an
"80 GB" HBM3 part holds 80 GiB); bandwidth in decimal bytes/s. A device whose operating system keeps a share of
memory (Apple's unified memory: Metal lets the GPU wire at most recommendedMaxWorkingSetSize, 2/3 of RAM on
16-32 GB Macs and 3/4 on 64 GB and more, as llama.cpp logs it: 10922.67 MB of 16 GB, 21845.34 MB of 32 GB,
73728 MB of 96 GB) states it in `usable_share`, and `memory_bytes` is what the model may use.
"this CPU" is measured (engine.measure.probe): matmul probes for the peak per dtype, copies for the bandwidth.
A kernel is compute-bound when its FLOPs per byte exceed the ridge point peak / bandwidth.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.budget.flops import arithmetic_intensity
from engine.config import ModelConfig
from engine.measure.probe import machine_bandwidth, machine_peaks
from engine.runtime import DTYPE_BYTES
from engine.validation import choice_problem, require, size_problems

GiB = 2**30


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    peak_flops: dict[str, float]     # dtype -> dense FLOP/s
    mem_bandwidth: float             # bytes/s
    memory_bytes: int | None = None  # what a model may use on the device, None when it is the host's
    source: str = ""
    key: str = ""                    # the planner's id (`plan --gpu h100-80gb`)
    match: str = ""                  # the substring torch.cuda.get_device_name shows for this part
    usable_share: float = 1.0        # share of the physical memory the OS lets the accelerator use

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


def _gpu(name: str, key: str, memory_gib: float, bandwidth: float, source: str, match: str | None = None,
         usable_share: float = 1.0, **peaks_tflops: float) -> DeviceProfile:
    """A profile from datasheet units: GiB of memory, bytes/s, dense TFLOP/s per dtype (bf16 also serves fp16)."""
    peaks = {dtype: float(f"{tflops}e12") for dtype, tflops in peaks_tflops.items()}   # 66.9e12, not 66.9 * 1e12
    peaks.setdefault("fp16", peaks["bf16"])
    return DeviceProfile(name, peaks, bandwidth, int(memory_gib * usable_share * GiB), source, key,
                         name if match is None else match, usable_share)


_BLACKWELL = "NVIDIA Blackwell architecture technical brief (HGX B200, 1,000 W), as tabulated at " \
             "glennklockwood.com/garden/processors/B200"
# Order matters where one name contains another (torch reports "NVIDIA L40S": L40S is tried before L4).
DEVICE_PROFILES: dict[str, DeviceProfile] = {p.name: p for p in [
    _gpu("H100", "h100-80gb", 80, 3.35e12, "NVIDIA H100 SXM5 datasheet", bf16=989.4, fp8=1978.9, fp32=66.9),
    _gpu("H200", "h200-141gb", 141, 4.8e12, "NVIDIA H200 SXM datasheet", bf16=989.4, fp8=1978.9, fp32=66.9),
    _gpu("B200", "b200-180gb", 180, 8.0e12, _BLACKWELL + "; 180 GB usable per GPU (DGX B200: 1,440 GB for 8)",
         bf16=2250, fp8=4500, fp4=9000, fp32=80),
    _gpu("A100", "a100-80gb", 80, 2.039e12, "NVIDIA A100 SXM4 80GB datasheet", bf16=312, fp32=19.5),
    _gpu("A100 40GB", "a100-40gb", 40, 1.555e12, "NVIDIA A100 SXM4 40GB datasheet", "A100", bf16=312, fp32=19.5),
    _gpu("L40S", "l40s-48gb", 48, 864e9, "NVIDIA L40S datasheet", bf16=362.05, fp8=733, fp32=91.6),
    _gpu("L4", "l4-24gb", 24, 300e9, "NVIDIA L4 datasheet (242 / 485 TFLOPS with sparsity, halved)",
         bf16=121, fp8=242.5, fp32=30.3),
    _gpu("A10G", "a10g-24gb", 24, 600e9, "AWS EC2 G5 (NVIDIA A10G, 24 GB, 600 GB/s); tensor peak not published by "
         "NVIDIA or AWS, 70 TFLOPS as Baseten's A10 vs A10G comparison lists it", bf16=70, fp32=35),
    _gpu("RTX 3090", "rtx-3090-24gb", 24, 936e9, "NVIDIA Ampere GA102 whitepaper (bf16 with fp32 accumulate)",
         bf16=71, fp32=35.6),
    _gpu("RTX 4090", "rtx-4090-24gb", 24, 1.008e12, "NVIDIA Ada Lovelace whitepaper (bf16/fp8 with fp32 "
         "accumulate)", bf16=165.2, fp8=330.3, fp32=82.6),
    _gpu("RTX 5090", "rtx-5090-32gb", 32, 1.792e12, "NVIDIA RTX Blackwell GB202 whitepaper (838.4 / 1,676.8 / "
         "3,352 sparse fp16 / fp8 / fp4 TFLOPS; dense, fp32 accumulate: a quarter, a quarter, a half)",
         bf16=209.6, fp8=419.2, fp4=1676, fp32=104.8),
    _gpu("MI300X", "mi300x-192gb", 192, 5.3e12, "AMD Instinct MI300X datasheet", bf16=1307.4, fp8=2614.9, fp32=163.4),
    _gpu("Apple M2 Ultra", "m2-ultra-192gb", 192, 800e9, "Apple M2 Ultra (76-core GPU): 800 GB/s; fp16 = fp32 = 76 "
         "cores x 128 ALUs x 2 x 1.398 GHz; the GPU may wire 3/4 of the unified memory", None, 0.75,
         bf16=27.2, fp32=27.2),
    _gpu("Apple M4 Max", "m4-max-128gb", 128, 546e9, "Apple M4 Max (40-core GPU): 546 GB/s; fp16 = fp32 = 40 cores "
         "x 128 ALUs x 2 x 1.678 GHz; the GPU may wire 3/4 of the unified memory", None, 0.75,
         bf16=17.2, fp32=17.2),
    MeasuredCPU(),
]}
GPUS: dict[str, str] = {p.key: p.name for p in DEVICE_PROFILES.values() if p.key}   # planner id -> profile


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
    require(choice_problem("device", device, DEVICE_PROFILES), choice_problem("dtype", dtype, DTYPE_BYTES),
            *size_problems(batch, seq))   # every bad argument in one message (roofline_on checks its own again)
    return roofline_on(cfg, DEVICE_PROFILES[device], batch, seq, dtype)


def roofline_on(cfg: ModelConfig, prof: DeviceProfile, batch: int, seq: int,
                dtype: str = "bf16") -> dict[str, Roofline]:
    """Prefill and one decode step placed on the roofline of `prof`."""
    require(choice_problem("dtype", dtype, DTYPE_BYTES), *size_problems(batch, seq))
    peak, bw = prof.peak_flops[dtype], prof.mem_bandwidth
    out = {}
    for phase, it in arithmetic_intensity(cfg, batch, seq, dtype).items():
        i = it.flops_per_byte
        out[phase] = Roofline(device=prof.name, phase=phase, flops_per_byte=i, ridge=peak / bw,
                              attainable_flops=min(peak, i * bw), time_s=max(it.flops / peak, it.bytes / bw),
                              bound="compute" if i >= peak / bw else "memory")
    return out
