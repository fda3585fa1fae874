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
  nvfp4              NVIDIA NVFP4: FP4 E2M1 values, blocks of 16 with one FP8 E4M3 scale, plus one fp32 global
                     scale per tensor (4.5 bits + 4 B)
  checkpoint         as the published checkpoint stores each tensor (the config's ckpt_* fields, engine/checkpoint.py)
  gguf:TYPE          a llama.cpp file type (gguf:Q4_K_M, ...): each tensor in the ggml type llama-quantize gives it
                     (engine/plan/gguf.py, engine/plan/ggml.py), norms and biases F32; `+imatrix` / `-imatrix`
                     say whether an importance matrix was used (default: only where the types need one)
Except under checkpoint and gguf:, only the block matrices (kinds matrix and expert, engine/plan/tensors.py:
attention, FFN, MoE experts, the recurrent mixers' projections, the sparse-attention indexer's q and k) are
quantized by default, as vLLM passes its quant_config to those layers; embeddings, head, norms, biases, routers,
the mixers' conv weights and per-channel vectors (A_log, D, dt_bias, sinks) and the indexer's weights_proj (vLLM
deepseek_v2.py Indexer: weights_proj with quant_config=None; Mamba's conv1d likewise) stay in the high precision
(`quantize_also` chooses for embeddings and head, and the plan shows which).
KV cache (per layer, K and V each):
  int8 / int4        per token and kv head: head_dim values + one fp16 scale (int4 also an fp16 zero point)
  fp8                1 B per element + one fp32 scale per layer for K and one for V
  f16 bf16 f32 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl   llama.cpp's cache types (-ctk/-ctv): ggml rows of head_dim
"""
from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from engine.checkpoint import shipped_bytes
from engine.config import ModelConfig
from engine.plan import ggml
from engine.plan.gguf import FILE_TYPES, file_types, needs_imatrix
from engine.plan.tensors import Tensor, param_tensors

HIGH = {"fp32": 4, "bf16": 2, "fp16": 2}
PLAIN_QUANTS = ("none", "int8", "fp8", "int4-g32", "int4-g64", "int4-g128", "nf4", "nf4-dq", "mxfp4", "nvfp4")
GGUF_QUANTS = tuple(f"gguf:{f}" for f in FILE_TYPES)
WEIGHT_QUANTS = PLAIN_QUANTS + ("checkpoint",) + GGUF_QUANTS
LLAMA_CPP_KV = ("f16", "bf16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")
KV_QUANTS = ("none", "fp8", "int8", "int4") + LLAMA_CPP_KV
PLAIN_KEPT = ("index_weights",)           # matrices vLLM keeps unquantized (DSA indexer's weights_proj)
KEEP_CHOICES = ("embeddings", "head")      # roles that may be quantized too when not kept

# (bytes, storage label) of a tensor with a given local shape
Storage = Callable[[Tensor, tuple[int, ...]], tuple[int, str]]


def quant_problem(scheme: str) -> str | None:
    """None for a known weight scheme (gguf: with an optional +imatrix / -imatrix), else the message."""
    # one suffix at most: gguf:Q4_K_M-imatrix+imatrix says both
    gguf_suffix = scheme.startswith("gguf:") and scheme.endswith(("+imatrix", "-imatrix"))
    base = scheme[:-len("+imatrix")] if gguf_suffix else scheme
    if base in WEIGHT_QUANTS:
        return None
    return (f"quant: {scheme!r} is not one of {', '.join(PLAIN_QUANTS)}, or gguf:TYPE with TYPE one of "
            f"{', '.join(FILE_TYPES)} (optionally +imatrix or -imatrix)")


def quantized_bytes(shape: tuple[int, ...], scheme: str) -> int:
    """Bytes of one tensor of `shape` stored under a plain quantizing `scheme` (not 'none', not gguf:)."""
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
    if scheme == "nvfp4":
        return math.ceil(n / 2) + math.ceil(n / 16) + 4
    raise ValueError(quant_problem(scheme) or f"quant: {scheme!r} does not quantize")


def is_quantized(t: Tensor, scheme: str, quantize_also: tuple[str, ...] = ()) -> bool:
    """Block matrices are quantized under any plain scheme; embeddings/head only when named in `quantize_also`."""
    if scheme == "none":
        return False
    return (t.kind in ("matrix", "expert") and t.role not in PLAIN_KEPT) or \
        {"embedding": "embeddings", "head": "head"}.get(t.kind) in quantize_also


_KEPT_LABELS = {"norm": "norms", "bias": "biases", "router": "routers", "conv": "conv weights",
                "vector": "per-channel vectors (A_log, D, dt_bias, sinks)"}


def kept_high(cfg: ModelConfig, quantize_also: tuple[str, ...]) -> list[str]:
    """What a plain scheme leaves in the high precision, in words: norms and biases always, then what the model
    has of routers, conv weights, vectors and unquantized matrices, then embeddings/head unless quantized too."""
    kinds = {t.kind for t in param_tensors(cfg)}
    out = ["norms", "biases"] + [w for k, w in _KEPT_LABELS.items() if k in kinds and w not in ("norms", "biases")]
    if any(t.role in PLAIN_KEPT for t in param_tensors(cfg)):
        out.append("the sparse-attention indexer's weights_proj")
    return out + [k for k in KEEP_CHOICES if k not in quantize_also]


@lru_cache(maxsize=32)
def gguf_types(cfg: ModelConfig, scheme: str) -> dict[str, str]:
    """{tensor name: ggml type} under `gguf:TYPE[+imatrix|-imatrix]`."""
    ftype = scheme.removeprefix("gguf:").removesuffix("+imatrix").removesuffix("-imatrix")
    imatrix = scheme.endswith("+imatrix") or (not scheme.endswith("-imatrix") and needs_imatrix(cfg, ftype))
    return file_types(cfg, ftype, imatrix)


def weight_storage(cfg: ModelConfig, scheme: str, high: str, quantize_also: tuple[str, ...] = ()) -> Storage:
    """The function that prices (a shard of) each tensor of `cfg` under `scheme`: (bytes, what it is stored as)."""
    if scheme.startswith("gguf:"):
        types = gguf_types(cfg, scheme)
        tied = types.get("tok_emb.weight")          # a tied head copied onto the last pipeline stage

        def gguf(t: Tensor, shape: tuple[int, ...]) -> tuple[int, str]:
            kind = types.get(t.name, tied)
            return ggml.tensor_bytes(kind, shape), kind
        return gguf

    if scheme == "checkpoint":
        return lambda t, shape: shipped_bytes(cfg, t.role, t.name, shape)

    def plain(t: Tensor, shape: tuple[int, ...]) -> tuple[int, str]:
        if is_quantized(t, scheme, quantize_also):
            return quantized_bytes(shape, scheme), scheme
        return math.prod(shape) * HIGH[high], high
    return plain


def checkpoint_bytes(cfg: ModelConfig) -> tuple[int, int]:
    """(the model's tensors as the checkpoint ships them, its multi-token-prediction modules'). A published
    MTP module (DeepSeek-V3's model.layers.61) is one more block of the last layer's shapes, its 2d -> d
    projection and three norms kept in 2 B, and its own copies of the embedding and output head; vLLM loads it
    only for speculative decoding."""
    tensors = param_tensors(cfg)
    model = sum(shipped_bytes(cfg, t.role, t.name, t.shape)[0] for t in tensors)
    d = cfg.d_model
    block = sum(shipped_bytes(cfg, t.role, t.name, t.shape)[0] for t in tensors if t.layer == cfg.n_layers - 1)
    module = block + 2 * (2 * d * d + 3 * d + 2 * cfg.vocab_size * d)
    return model, (cfg.mtp_depth or 0) * module


def kv_quant_bytes(layers: list[tuple[int, int]], scheme: str, high: str) -> int:
    """KV cache bytes from each layer's (values held, values per cached vector) (engine/budget/memory.py)."""
    if scheme == "none":
        return sum(e for e, _ in layers) * HIGH[high]
    if scheme == "fp8":
        return sum(e + 2 * 4 for e, _ in layers if e)   # a K and a V scale on each layer that caches
    if scheme == "int8":
        return sum(e + 2 * (e // w) for e, w in layers)
    if scheme == "int4":
        return sum(math.ceil(e / 2) + 4 * (e // w) for e, w in layers)
    if scheme in LLAMA_CPP_KV:
        return sum((e // w) * ggml.row_bytes(scheme.upper(), w) for e, w in layers)
    raise ValueError(f"kv_quant: {scheme!r} is not one of {', '.join(KV_QUANTS)}")
