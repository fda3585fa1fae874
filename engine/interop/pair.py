"""One module pair of a state-dict mapping: an HF module, our module(s) and the codec between them (the codecs
are described in engine/interop/weights.py). Its own module so that weights.py and the MoE readers both use it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    hf: str                 # HF module path (without .weight / .bias)
    ours: tuple[str, ...]   # our module path(s): three for a fused q/k/v
    codec: str
    raw: bool = False       # a bare tensor name (stacked expert weights), not a module with .weight / .bias
