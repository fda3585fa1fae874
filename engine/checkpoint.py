"""How a published checkpoint stores its weights: the declared fields (from its config.json quantization_config)
and the bytes of each tensor as shipped, scales and zero points included.

A matrix of `rows` output x `cols` input features (an MoE expert stack: E of them), n = its values, G = the
group or block size, b = bits:
  mxfp4       gpt-oss: 4-bit E2M1 codes (n/2 B, "_blocks") + one E8M0 scale byte per 32 inputs (n/32, "_scales")
  fp8_block   DeepSeek-V3: E4M3 values (n B) + one fp32 weight_scale_inv per G x G block (G = 128)
  nvfp4       compressed-tensors NVFP4: FP4 codes (n/2) + an FP8 E4M3 scale per 16 inputs (n/16) + one fp32
              global scale (4 B)
  bnb_nf4     bitsandbytes 4-bit (also bnb_fp4): codes n/2 + per block of G = 64 an fp32 absmax, or with double
              quantization a 1-byte absmax code, an fp32 absmax per 256 blocks and a 256-entry fp32 code book;
              a 16-entry fp32 code book, and the quant_state as JSON text (its shape and settings)
  bnb_int8    LLM.int8: int8 values (n) + an fp32 absmax per output row (SCB) + a 1-byte format tag
  awq         AutoAWQ GEMM: qweight (n*b/8, int32 packs along outputs), qzeros (b bits per group and output),
              fp16 scales per group and output; G = 128
  gptq        AutoGPTQ: the same three (qweight packed along inputs) + g_idx, an int32 group index per input
Everything the format does not quantize (ckpt_keep; biases, norms and routers always) is stored in 2 B
(bf16/fp16, the checkpoint's torch_dtype).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from engine.validation import Knobs, declare

if TYPE_CHECKING:   # engine.config assembles ModelConfig from this module's knobs
    from engine.config import ModelConfig

FORMATS = ("none", "mxfp4", "fp8_block", "nvfp4", "bnb_nf4", "bnb_fp4", "bnb_int8", "awq", "gptq")
PARTS = ("attention", "dense_ffn", "shared_experts", "experts", "router", "embeddings", "head")
# what each format leaves in 2 B by default (Hugging Face: modules_to_not_convert / ignore; lm_head kept)
DEFAULT_KEEP = {"mxfp4": ("attention", "dense_ffn", "shared_experts", "router", "embeddings", "head")}
_KEEP = ("router", "embeddings", "head")
DEFAULT_GROUP = {"fp8_block": 128, "bnb_nf4": 64, "bnb_fp4": 64, "awq": 128, "gptq": 128}


@dataclass(frozen=True)
class CheckpointKnobs(Knobs):
    """How the published checkpoint stores its weights (its quantization_config); `plan --quant checkpoint`."""
    ckpt_format: str = declare("none", "checkpoint", "How the published checkpoint stores its weights "
                                "(quantization_config): none, mxfp4 (gpt-oss), fp8_block (DeepSeek-V3), nvfp4, "
                                "bitsandbytes bnb_nf4 / bnb_fp4 / bnb_int8, awq, gptq.", choices=FORMATS)
    ckpt_bits: int | None = declare(None, "checkpoint", "Bits per weight of an awq or gptq checkpoint.", lo=2, hi=8,
                                    null="4")
    ckpt_group_size: int | None = declare(None, "checkpoint", "Values per scale: awq / gptq group, fp8_block block "
                                          "edge, bitsandbytes block.", lo=1, null="the format's (128; 64 for "
                                          "bitsandbytes)")
    ckpt_double_quant: bool = declare(False, "checkpoint", "bitsandbytes 4-bit: the absmaxes stored as 8-bit codes "
                                      "(bnb_4bit_use_double_quant).")
    ckpt_keep: tuple[str, ...] | None = declare(None, "checkpoint", "Parts the checkpoint leaves unquantized "
                                                "(modules_to_not_convert), of: " + ", ".join(PARTS) + ".",
                                                choices=PARTS, null="the format's: everything but the experts "
                                                "for mxfp4, else router, embeddings and head")

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        out = []
        if ok("ckpt_format", "ckpt_bits") and c.ckpt_bits is not None and c.ckpt_format not in ("awq", "gptq"):
            out.append(f"ckpt_bits: only awq and gptq checkpoints choose their bits, not ckpt_format: {c.ckpt_format}")
        if ok("ckpt_format", "ckpt_double_quant") and c.ckpt_double_quant and c.ckpt_format not in ("bnb_nf4",
                                                                                                  "bnb_fp4"):
            out.append(f"ckpt_double_quant: only bitsandbytes 4-bit checkpoints have it, not ckpt_format: "
                       f"{c.ckpt_format}")
        return out


def default_keep(fmt: str) -> tuple[str, ...]:
    """The parts a checkpoint format leaves unquantized when its file names none."""
    return DEFAULT_KEEP.get(fmt, _KEEP)


def kept_parts(cfg: ModelConfig) -> tuple[str, ...]:
    return cfg.ckpt_keep if cfg.ckpt_keep is not None else default_keep(cfg.ckpt_format)


def part_of(role: str, name: str) -> str | None:
    """Which PARTS a tensor belongs to (None: biases, norms and the like, never quantized)."""
    if role in ("q", "k", "v", "o", "g", "q_a", "q_b", "kv_a", "kv_b"):   # g: the gate HF keeps in q_proj
        return "attention"
    if role in ("gate", "up", "down"):
        return "shared_experts" if ".shared." in name else "dense_ffn"
    if role in ("expert_gate", "expert_up", "expert_down"):
        return "experts"
    return {"router": "router", "shared_gate": "router", "embedding": "embeddings", "head": "head"}.get(role)


def _bnb_state(rows: int, cols: int, fmt: str, double: bool) -> int:
    """bitsandbytes' packed quant_state: the JSON of its non-tensor entries (the offset as a typical float)."""
    state = {"quant_type": fmt[4:], "blocksize": 64, "dtype": "bfloat16", "shape": [rows, cols]}
    if double:
        state.update(nested_blocksize=256, nested_dtype="float32", nested_offset=0.03785453736782074)
    return len(json.dumps(state))


def shipped_bytes(cfg: ModelConfig, role: str, name: str, shape: tuple[int, ...]) -> tuple[int, str]:
    """(bytes, format) of one tensor as the checkpoint stores it; `shape` may be a shard of it."""
    fmt, n = cfg.ckpt_format, math.prod(shape)
    part = part_of(role, name)
    if fmt == "none" or part is None or part in kept_parts(cfg) or len(shape) < 2:
        return 2 * n, "bf16"
    rows, cols = shape[-2], shape[-1]
    stack = n // (rows * cols)                       # experts stacked in one tensor
    g = cfg.ckpt_group_size or DEFAULT_GROUP.get(fmt, 0)
    bits = cfg.ckpt_bits or 4
    if fmt == "mxfp4":
        out = n // 2 + math.ceil(cols / 32) * rows * stack
    elif fmt == "fp8_block":
        out = n + 4 * stack * math.ceil(rows / g) * math.ceil(cols / g)
    elif fmt == "nvfp4":
        out = n // 2 + math.ceil(cols / 16) * rows * stack + 4
    elif fmt in ("bnb_nf4", "bnb_fp4"):
        blocks = math.ceil(n / g)
        absmax = blocks + 4 * math.ceil(blocks / 256) + 256 * 4 if cfg.ckpt_double_quant else 4 * blocks
        out = math.ceil(n / 2) + absmax + 16 * 4 + _bnb_state(rows, cols, fmt, cfg.ckpt_double_quant)
    elif fmt == "bnb_int8":
        out = n + 4 * rows * stack + 1
    else:                                            # awq, gptq
        groups = math.ceil(cols / g) * stack
        out = math.ceil(n * bits / 8) + math.ceil(groups * rows * bits / 8) + 2 * groups * rows
        if fmt == "gptq":
            out += 4 * cols * stack
    return out, fmt
