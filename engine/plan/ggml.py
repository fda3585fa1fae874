"""ggml tensor types, the storage of llama.cpp's GGUF files: bytes per block from each type's block layout.

A quantized ggml type stores every row of a tensor (ne0 = the input features) in blocks of `elements` values; a
block's bytes are the sum of its fields as ggml/src/ggml-common.h declares the block struct (and static_asserts its
size), e.g. block_q4_K = d, dmin (fp16 each) + scales[12] + qs[QK_K/2] = 144 bytes per 256 values, 4.5 bits per
weight. A row of n values takes n / elements blocks (ggml_row_size); a row that blocks do not divide cannot be
stored in that type (llama.cpp's quantizer falls back to another one, engine/plan/gguf.py).
Only the storage types are listed (not Q8_1 / Q8_K, which exist only inside dot products).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

QK_K = 256          # a K-quant / i-quant super-block


@dataclass(frozen=True)
class GGMLType:
    name: str
    elements: int                              # values per block
    fields: tuple[tuple[str, int], ...]        # (field, bytes) of one block, in struct order

    @property
    def block_bytes(self) -> int:
        return sum(b for _, b in self.fields)

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.block_bytes / self.elements

    @property
    def layout(self) -> str:
        """'d 2 + qs 16 = 18 B per 32 values (4.5 bits)'."""
        parts = " + ".join(f"{f} {b}" for f, b in self.fields)
        return f"{parts} = {self.block_bytes} B per {self.elements} values ({self.bits_per_weight:g} bits)"


def _t(name: str, elements: int, *fields: tuple[str, int]) -> GGMLType:
    return GGMLType(name, elements, fields)


H = 2   # ggml_half
TYPES: dict[str, GGMLType] = {t.name: t for t in (
    _t("F32", 1, ("value", 4)),
    _t("F16", 1, ("value", H)),
    _t("BF16", 1, ("value", 2)),
    _t("Q4_0", 32, ("d", H), ("qs", 32 // 2)),
    _t("Q4_1", 32, ("d", H), ("m", H), ("qs", 32 // 2)),
    _t("Q5_0", 32, ("d", H), ("qh", 4), ("qs", 32 // 2)),
    _t("Q5_1", 32, ("d", H), ("m", H), ("qh", 4), ("qs", 32 // 2)),
    _t("Q8_0", 32, ("d", H), ("qs", 32)),
    _t("Q2_K", QK_K, ("scales", QK_K // 16), ("qs", QK_K // 4), ("d", H), ("dmin", H)),
    _t("Q3_K", QK_K, ("hmask", QK_K // 8), ("qs", QK_K // 4), ("scales", 12), ("d", H)),
    _t("Q4_K", QK_K, ("d", H), ("dmin", H), ("scales", 12), ("qs", QK_K // 2)),
    _t("Q5_K", QK_K, ("d", H), ("dmin", H), ("scales", 12), ("qh", QK_K // 8), ("qs", QK_K // 2)),
    _t("Q6_K", QK_K, ("ql", QK_K // 2), ("qh", QK_K // 4), ("scales", QK_K // 16), ("d", H)),
    _t("IQ1_S", QK_K, ("d", H), ("qs", QK_K // 8), ("qh", 2 * QK_K // 32)),
    _t("IQ1_M", QK_K, ("qs", QK_K // 8), ("qh", QK_K // 16), ("scales", QK_K // 32)),
    _t("IQ2_XXS", QK_K, ("d", H), ("qs", 2 * QK_K // 8)),
    _t("IQ2_XS", QK_K, ("d", H), ("qs", 2 * QK_K // 8), ("scales", QK_K // 32)),
    _t("IQ2_S", QK_K, ("d", H), ("qs", QK_K // 4), ("qh", QK_K // 32), ("scales", QK_K // 32)),
    _t("IQ3_XXS", QK_K, ("d", H), ("qs", 3 * QK_K // 8)),
    _t("IQ3_S", QK_K, ("d", H), ("qs", QK_K // 4), ("qh", QK_K // 32), ("signs", QK_K // 8), ("scales", QK_K // 64)),
    _t("IQ4_NL", 32, ("d", H), ("qs", 32 // 2)),
    _t("IQ4_XS", QK_K, ("d", H), ("scales_h", 2), ("scales_l", QK_K // 64), ("qs", QK_K // 2)),
    _t("TQ1_0", QK_K, ("qs", (QK_K - 4 * QK_K // 64) // 5), ("qh", QK_K // 64), ("d", H)),
    _t("TQ2_0", QK_K, ("qs", QK_K // 4), ("d", H)),
    _t("MXFP4", 32, ("e", 1), ("qs", 32 // 2)),                 # E8M0 scale + 32 FP4 (E2M1) values
    _t("NVFP4", 64, ("d", 64 // 16), ("qs", 64 // 2)),          # a UE4M3 scale per 16 values + FP4 values
)}


def divides(type_name: str, row: int) -> bool:
    """Whether rows of `row` values can be stored in this type (whole blocks only)."""
    return row % TYPES[type_name].elements == 0


def row_bytes(type_name: str, row: int) -> int:
    """ggml_row_size: bytes of one row of `row` values (a partial block, e.g. a tensor-parallel shard, rounds up)."""
    t = TYPES[type_name]
    return math.ceil(row / t.elements) * t.block_bytes


def tensor_bytes(type_name: str, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor of `shape` (the last dimension is the row, ggml's ne0) stored in `type_name`."""
    return math.prod(shape[:-1]) * row_bytes(type_name, shape[-1])
