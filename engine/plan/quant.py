"""Quantized storage: exact bytes of a weight tensor or of the KV cache under each scheme, scales included.

Weights (a matrix of `rows` output features x `cols` input features; groups run along the input features):
  bf16 / fp16        2 B per element; fp32 4 B
  int8               1 B per element + one fp16 absmax scale per output row          (LLM.int8 / per-channel)
  fp8                1 B per element + one fp32 scale per tensor                     (per-tensor E4M3)
  int4-gG            4-bit values packed 2 per byte + per group of G inputs an fp16 scale and a 4-bit zero
                     point packed 2 per byte (GPTQ/AWQ layout): ceil(rows*groups/2) zero bytes
  nf4                bitsandbytes NF4: 4-bit codes, blocks of 64 over the flattened tensor, one fp32 absmax each
  nf4-dq             NF4 with double quantization (QLoRA): the absmaxes become 8-bit codes (1 B per block) with
                     one fp32 scale per 256 blocks and one fp32 offset per tensor
                     (4 + 8/64 + 32/(64*256) = 4.127 bits per weight)
  mxfp4              OCP MX: FP4 E2M1 values, blocks of 32 with one shared E8M0 scale byte (4.25 bits)
Only the block matrices (MoE experts included) are quantized by default; embeddings, head, norms, biases and
routers stay in the high precision
(`keep` chooses, and the plan shows which). KV cache (per layer, K and V each):
  int8 / int4        per token and kv head: head_dim values + one fp16 scale (int4 also an fp16 zero point)
  fp8                1 B per element + one fp32 scale per layer for K and one for V
"""
from __future__ import annotations

import math

from engine.plan.tensors import EXPERTS, Tensor

HIGH = {"fp32": 4, "bf16": 2, "fp16": 2}
WEIGHT_QUANTS = ("none", "int8", "fp8", "int4-g32", "int4-g64", "int4-g128", "nf4", "nf4-dq", "mxfp4")
KV_QUANTS = ("none", "fp8", "int8", "int4")
MATRIX_ROLES = ("q", "k", "v", "o", "gate", "up", "down") + EXPERTS
KEEP_CHOICES = ("embeddings", "head")      # roles that may be quantized too when not kept


def quantized_bytes(shape: tuple[int, ...], scheme: str) -> int:
    """Bytes of one tensor of `shape` stored under `scheme` (a quantizing scheme, not 'none')."""
    n = math.prod(shape)
    rows, cols = math.prod(shape[:-1]), shape[-1]     # every output row of every expert; groups along inputs
    if scheme == "int8":
        return n + 2 * rows
    if scheme == "fp8":
        return n + 4
    if scheme.startswith("int4-g"):
        groups = rows * math.ceil(cols / int(scheme[6:]))
        return math.ceil(n / 2) + 2 * groups + math.ceil(groups / 2)
    if scheme == "nf4":
        return math.ceil(n / 2) + 4 * math.ceil(n / 64)
    if scheme == "nf4-dq":
        blocks = math.ceil(n / 64)
        return math.ceil(n / 2) + blocks + 4 * math.ceil(blocks / 256) + 4
    if scheme == "mxfp4":
        return math.ceil(n / 2) + math.ceil(n / 32)
    raise ValueError(f"quant: {scheme!r} is not one of {', '.join(WEIGHT_QUANTS)}")


def is_quantized(t: Tensor, scheme: str, quantize_also: tuple[str, ...] = ()) -> bool:
    """Block matrices are quantized under any scheme; embeddings/head only when named in `quantize_also`."""
    if scheme == "none":
        return False
    role = {"embedding": "embeddings", "head": "head"}.get(t.role, t.role)
    return t.role in MATRIX_ROLES or role in quantize_also


def tensor_bytes(t: Tensor, shape: tuple[int, ...], scheme: str, high: str,
                 quantize_also: tuple[str, ...] = ()) -> int:
    """Bytes of (a shard of) tensor `t` with local `shape`: quantized, or in the high precision `high`."""
    if is_quantized(t, scheme, quantize_also):
        return quantized_bytes(shape, scheme)
    return math.prod(shape) * HIGH[high]


def kv_quant_bytes(elements_per_layer: list[int], vectors_per_layer: list[int], scheme: str, high: str) -> int:
    """KV cache bytes from each layer's K+V element count and its count of (token, kv head) vectors."""
    if scheme == "none":
        return sum(elements_per_layer) * HIGH[high]
    if scheme == "fp8":
        return sum(e + 2 * 4 for e in elements_per_layer)
    if scheme == "int8":
        return sum(e + 2 * v for e, v in zip(elements_per_layer, vectors_per_layer))
    if scheme == "int4":
        return sum(math.ceil(e / 2) + 4 * v for e, v in zip(elements_per_layer, vectors_per_layer))
    raise ValueError(f"kv_quant: {scheme!r} is not one of {', '.join(KV_QUANTS)}")
