"""A config.json's quantization_config as the checkpoint fields (engine/checkpoint.py), for every family.

The architecture and the parameter count are the dequantized model's; quantization_config only says how the
published files store the weights, which `plan --quant checkpoint` then sizes tensor by tensor:
  mxfp4               -> mxfp4 (transformers' MXFP4 quantizer converts only the MoE experts)
  fp8                 -> fp8_block with weight_block_size [G, G]
  compressed-tensors  -> nvfp4 (4-bit float, groups of 16) or fp8_block (8-bit float, block strategy)
  bitsandbytes        -> bnb_nf4 / bnb_fp4 (bnb_4bit_use_double_quant) or bnb_int8
  awq (gemm, gemv)    -> awq with bits (AwqConfig's default 4) and group_size;  gptq -> gptq with bits (which
                         GPTQConfig requires) and group_size
modules_to_not_convert / ignore / llm_int8_skip_modules become ckpt_keep (attention, router, experts, ...), in
mxfp4 too;
an entry naming one layer, or any other method, is refused by name: it cannot be sized from these fields.
"""
from __future__ import annotations

import re
from typing import Any

from engine.checkpoint import default_keep
from engine.interop.hf_reader import _Reader

KEY = "quantization_config"
_SKIP_KEYS = ("modules_to_not_convert", "ignore", "llm_int8_skip_modules")


def _part(module: str) -> str | None:
    """A module path of a skip list -> the part it names (None: one layer only, or not a part we know)."""
    leaf = module.removeprefix("re:").strip(".*$^")
    if re.search(r"\.\d+(\.|$)", leaf):
        return None                                       # model.layers.3.mlp: one layer
    for part, ends in (("shared_experts", ("shared_expert", "shared_experts")), ("experts", ("experts",)),
                       ("router", ("mlp.router", "mlp.gate", "block_sparse_moe.gate")),
                       ("attention", ("attn", "attention")),   # "attn" ends self_attn and linear_attn too
                       ("embeddings", ("embed_tokens", "wte")),
                       ("head", ("lm_head",)), ("dense_ffn", ("mlp",))):
        if leaf.endswith(ends):
            return part
    return None


def _keep(r: _Reader, q: dict, fmt: str) -> tuple[str, ...] | None:
    """ckpt_keep from the skip list: None when it names only parts the format keeps anyway."""
    key = next((k for k in _SKIP_KEYS if q.get(k)), None)   # a list: hf_types refuses any other type
    if key is None:
        return None
    parts = []
    for m in q[key]:
        part = _part(str(m))
        if part is None:
            r.bad(f"{KEY}.{key}", m, "only whole parts (attention, router, experts, shared experts, mlp, "
                                     "embeddings, lm_head) can be kept unquantized")
        elif part not in parts:
            parts.append(part)
    default = default_keep(fmt)
    return None if set(parts) <= set(default) else tuple(dict.fromkeys(default + tuple(parts)))


def quantization_fields(r: _Reader) -> dict[str, Any]:
    """The ckpt_* fields of r's quantization_config (none when it has none); problems go to r."""
    q = r.d.get(KEY)
    r.read.add(KEY)
    if q is None:
        return {}
    if not isinstance(q, dict):
        r.bad(KEY, q, "a mapping with quant_method is read")
        return {}
    method = q.get("quant_method")
    if method == "mxfp4":
        return dict(ckpt_format="mxfp4", ckpt_keep=_keep(r, q, "mxfp4"))
    if method == "fp8":
        block = q.get("weight_block_size")
        if not (isinstance(block, list) and len(block) == 2 and block[0] == block[1] and isinstance(block[0], int)):
            r.bad(f"{KEY}.weight_block_size", block, "square fp8 blocks [G, G] are read")
            return {}
        return dict(ckpt_format="fp8_block", ckpt_group_size=block[0], ckpt_keep=_keep(r, q, "fp8_block"))
    if method == "bitsandbytes":
        if q.get("load_in_8bit"):
            return dict(ckpt_format="bnb_int8", ckpt_keep=_keep(r, q, "bnb_int8"))
        kind = q.get("bnb_4bit_quant_type", "fp4")
        if not q.get("load_in_4bit"):
            r.bad(f"{KEY}.load_in_4bit", q.get("load_in_4bit"), "bitsandbytes is read with load_in_4bit or "
                                                                "load_in_8bit set")
            return {}
        if kind not in ("nf4", "fp4"):
            r.bad(f"{KEY}.bnb_4bit_quant_type", kind, "bitsandbytes 4-bit nf4 / fp4 or 8-bit is read")
            return {}
        fmt = f"bnb_{kind}"
        return dict(ckpt_format=fmt, ckpt_double_quant=bool(q.get("bnb_4bit_use_double_quant")),
                    ckpt_keep=_keep(r, q, fmt))
    if method in ("awq", "gptq"):
        # AwqConfig's bits default to 4; GPTQConfig has no default (transformers refuses a gptq file without)
        bits = q.get("bits", q.get("w_bit", 4 if method == "awq" else None))
        group = q.get("group_size", q.get("q_group_size", 128))
        if bits is None:
            r.bad(f"{KEY}.bits", bits, f"{method} is read with its bit width (2, 3, 4 or 8)")
            return {}
        if method == "awq" and str(q.get("version", "gemm")).lower() not in ("gemm", "gemv"):
            r.bad(f"{KEY}.version", q.get("version"), "AutoAWQ's gemm and gemv layouts are read")
        if not isinstance(group, int) or group < 1:
            r.bad(f"{KEY}.group_size", group, "a positive group size is read (not -1, one group per row)")
            return {}
        return dict(ckpt_format=method, ckpt_bits=bits, ckpt_group_size=group, ckpt_keep=_keep(r, q, method))
    if method == "compressed-tensors":
        return _compressed(r, q)
    r.bad(f"{KEY}.quant_method", method, "mxfp4, fp8, compressed-tensors, bitsandbytes, awq and gptq are read")
    return {}


def _compressed(r: _Reader, q: dict) -> dict[str, Any]:
    groups = list((q.get("config_groups") or {}).values())
    weights = groups[0].get("weights", {}) if len(groups) == 1 and isinstance(groups[0], dict) else {}
    bits, kind, size = weights.get("num_bits"), weights.get("type"), weights.get("group_size")
    if (bits, kind, size) == (4, "float", 16):
        return dict(ckpt_format="nvfp4", ckpt_keep=_keep(r, q, "nvfp4"))
    block = weights.get("block_structure")
    if (bits, kind) == (8, "float") and isinstance(block, list) and len(set(block)) == 1:
        return dict(ckpt_format="fp8_block", ckpt_group_size=block[0], ckpt_keep=_keep(r, q, "fp8_block"))
    # the one group's weights scheme; without one (no group, several, none with weights), the groups as written
    r.bad(f"{KEY}.config_groups", weights or q.get("config_groups"),
          "one group of NVFP4 (4-bit float, groups of 16) or block fp8 is read")
    return {}
