"""Where and in what precision a real model runs: the dtype names every budget, measurement and command accepts
('fp32', 'bf16', 'fp16'), their torch dtypes and bytes per element, and the default device.

One table, so a closed form and the measurement it is held against cannot disagree about a dtype.
"""
from __future__ import annotations

import torch

TORCH_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_BYTES: dict[str, int] = {name: dt.itemsize for name, dt in TORCH_DTYPES.items()}


def dtype_name(dtype: str | torch.dtype) -> str | torch.dtype:
    """'bf16' for torch.bfloat16, so callers may pass either spelling; names (and unknown dtypes) pass through
    for the caller's own check to reject."""
    if isinstance(dtype, torch.dtype):
        return next((name for name, dt in TORCH_DTYPES.items() if dt == dtype), dtype)
    return dtype


def default_device() -> str:
    """CUDA when this machine has it, else CPU: where a measurement runs unless the caller says otherwise."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' -> default_device(); a CUDA device on a machine without CUDA is a clear error, not a crash later."""
    allowed = "auto, cpu, cuda or cuda:N"
    try:
        dev = torch.device(default_device() if device == "auto" else device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device: {str(device)[:40]!r} is not {allowed}") from None
    if dev.type not in ("cpu", "cuda"):   # meta has no data: timings and losses there would be invented
        raise ValueError(f"device: {device!r} cannot run a model for timing or training; use {allowed}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {device!r} is not available on this machine; use auto or cpu")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device: {device!r} does not exist; this machine has {torch.cuda.device_count()} "
                         f"CUDA device(s)")
    return dev
