"""Human-readable numbers, one style everywhere: binary bytes (KiB, MiB, GiB), counts with thousands
separators, FLOPs in engineering notation (1.70 TFLOP)."""
from __future__ import annotations

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_ENGINEERING = ("", "K", "M", "G", "T", "P", "E")


def byte_unit(n: float) -> tuple[int, str]:
    """(divisor, unit) that puts |n| between 1 and 1024 binary units: 3 * 2**30 -> (2**30, 'GiB'). Charts scale
    a byte axis by it, so the axis and the fmt_bytes labels on it name the same unit."""
    power = 0
    while abs(n) >= 1024 ** (power + 1) and power < len(_BINARY) - 1:
        power += 1
    return 1024 ** power, _BINARY[power]


def fmt_bytes(n: float, digits: int = 2) -> str:
    """1073741824 -> '1.00 GiB'; exact powers print without noise (134217728 -> '128.00 MiB')."""
    div, unit = byte_unit(n)
    return f"{int(n)} B" if div == 1 else f"{n / div:.{digits}f} {unit}"


def fmt_count(n: int) -> str:
    return f"{int(n):,}"


def fmt_flops(n: float, unit: str = "FLOP", digits: int = 2) -> str:
    """1.70007e12 -> '1.70 TFLOP'; pass unit='FLOP/s' for rates."""
    value, power = float(n), 0
    while abs(value) >= 1000 and power < len(_ENGINEERING) - 1:
        value /= 1000
        power += 1
    return f"{value:.{digits}f} {_ENGINEERING[power]}{unit}"


def fmt_count_short(n: float) -> str:
    """Parameter counts as ML papers say them: 7e9 -> '7B', 1.5e6 -> '1.5M' (short scale: K, M, B, T)."""
    value, power = float(n), 0
    while abs(value) >= 1000 and power < 4:
        value /= 1000
        power += 1
    return f"{value:.3g}{('', 'K', 'M', 'B', 'T')[power]}"
