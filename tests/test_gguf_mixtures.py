"""Every llama.cpp file type's mixture, tensor category by tensor category, for models whose shapes reach each
rule of llama_tensor_get_type_impl (src/llama-quant.cpp): layer counts that 8 and 16 do not divide (qwen3-0.6b 28,
gemma-3-1b 26, deepseek-v2-lite and kimi-linear 27), eight experts (mixtral: attn_k/attn_v Q8_0, attn_output Q5_K), grouped-query
ratios below and at 4, the 70B rule (llama-3-70b), MLA's attn_kv_b, a tied embedding, and rows the blocks do not
divide (the fallbacks: gpt-oss 2,880, falcon 4,544, microgpt 16). The reviewed mixtures are tests/golden/gguf_mixtures.json: per role, the types in file
order as runs ("Q6_K x3"), what `plan --quant gguf:TYPE` shows each tensor as; plus whether llama-quantize needs an
importance matrix for the file. A changed rule, threshold or type name anywhere changes some run here."""
from __future__ import annotations

import pytest

from engine.plan.gguf import FILE_TYPES, file_types, needs_imatrix
from engine.plan.tensors import param_tensors
from engine.presets import get_preset

from tests.golden import check_golden

PRESETS = ("qwen3-0.6b", "gemma-3-1b", "phi-3.5-mini", "mixtral-8x7b", "llama-3-70b", "deepseek-v2-lite",
           "olmoe-1b-7b", "gpt2", "microgpt", "gpt-oss-20b", "falcon-7b", "kimi-linear-48b-a3b", "qwen3.5-9b")


def _runs(types: list[str]) -> str:
    out: list[list] = []
    for t in types:
        if out and out[-1][0] == t:
            out[-1][1] += 1
        else:
            out.append([t, 1])
    return " ".join(f"{t} x{n}" for t, n in out)


def _mixture(cfg, ftype: str, imatrix: bool) -> dict[str, str]:
    types = file_types(cfg, ftype, imatrix)
    by_role: dict[str, list[str]] = {}
    for t in param_tensors(cfg):
        by_role.setdefault(f"{t.kind}:{t.role}", []).append(types[t.name])
    return {role: _runs(ts) for role, ts in sorted(by_role.items())}


@pytest.mark.parametrize("preset", PRESETS)
def test_each_file_types_mixture_is_the_reviewed_one(preset: str) -> None:
    cfg = get_preset(preset).config
    got = {}
    for ftype in FILE_TYPES:
        if ftype in ("F32", "F16", "BF16"):
            continue
        got[ftype] = {"needs_imatrix": needs_imatrix(cfg, ftype), "imatrix": _mixture(cfg, ftype, True)}
        plain = _mixture(cfg, ftype, False)
        if plain != got[ftype]["imatrix"]:
            got[ftype]["no_imatrix"] = plain
    check_golden("gguf_mixtures", preset, got)


@pytest.mark.parametrize("ftype", ["F32", "F16", "BF16"])
def test_float_files_store_every_matrix_in_their_type_and_the_rest_in_f32(ftype: str) -> None:
    cfg = get_preset("qwen3-0.6b").config
    types = file_types(cfg, ftype)
    for t in param_tensors(cfg):
        assert types[t.name] == (ftype if t.kind in ("embedding", "head", "matrix", "expert") else "F32"), t.name
