"""llama.cpp's file types (Q4_K_M, IQ4_XS, ...): the ggml type its quantizer gives each tensor of a config.

A file type is a mixture, not one type: llama-quantize (src/llama-quant.cpp, llama_tensor_get_type) starts every
quantizable tensor at the file type's default type and moves some up or down by category and position:
  quantizable   2-D/3-D `.weight` tensors except norms, the MoE router (ffn_gate_inp), position embeddings and
                the recurrent mixers' conv (tensor_allows_quantization: `name.find("ssm_conv1d")`); ssm_a (A_log)
                and ssm_d (D) have no `.weight` suffix, so they stay too, even Mamba-1's 2-D ssm_a. The rest keep
                the converter's type: F32 for 1-D tensors, norms, biases, router, positions, conv and ssm_a/ssm_d.
                The mixers' projections are quantized (ssm_in, ssm_out, ssm_x, ssm_dt, ssm_beta/alpha, KDA's
                ssm_f_a/f_b/g_a/g_b) in the file type's default type (category OTHER), as is the sparse-attention
                indexer (indexer.attn_q_b, indexer.proj; indexer.attn_k falls in the attn_k category by name)
  output        output.weight (and the token embedding when it is tied to it): Q6_K (Q8_0 files keep Q8_0;
                IQ1/IQ2 files Q5_K; MXFP4_MOE Q8_0)
  attn_v        (and MLA's attn_kv_b) more bits: Q4_K_M/Q5_K_M give Q6_K to the "use_more_bits" half of them
                (the first and last eighth and every third between); Q3_K_M Q5_K to the first two, Q4_K after
  ffn_down      likewise by layer: Q4_K_M -> Q6_K on use_more_bits layers, Q3_K_M -> Q5_K (first 1/16) or Q4_K
  ...           every rule of llama_tensor_get_type_impl for non-Falcon models, transcribed in _rule below
  fallback      a row (ne0, the input features) that the chosen type's blocks do not divide falls back
                (K-quants to Q4_0/Q5_0/Q5_1/Q8_0, i-quants to IQ4_NL), then to F16
Tensors are named and categorised as llama.cpp's converter names the LLaMA-family layout (attn_q, attn_k, attn_v,
attn_output, ffn_gate/up/down[_exps|_shexp], token_embd, output) and gguf-py tensor_mapping.py the others: Kimi
Linear's KDA self_attn.q_proj/k_proj/v_proj/o_proj are attn_q/attn_k/attn_v/attn_output (its attn_v counts among
the attn_v tensors); Qwen3-Next/3.5's attention output gate rides in attn_q (their q_proj holds it); Qwen3-Next's
fused in_proj_qkvz is ssm_in (category OTHER). Qwen3.5's files name in_proj_qkv attn_qkv, which newer
llama-quant.cpp counts like attn_v (category_is_attn_v); that is not modelled (a config does not say which of the
two a Gated DeltaNet is), so Qwen3.5's Q4_K_M/Q5_K_M files read a few attn_qkv tensors one type low.
The Falcon-only rules and llama3's tiny rope_freqs tensor (head_dim/2 F32 values) are left out. `imatrix`: whether
an importance matrix is used (the IQ1/IQ2 types need one; it changes a few choices of IQ3_XXS, IQ4_NL/IQ4_XS
and Q4_0/Q5_0).
"""
from __future__ import annotations

from engine.config import ModelConfig
from engine.plan.ggml import TYPES, divides
from engine.plan.tensors import Tensor, param_tensors

# llama-quantize's file types and the default ggml type of each (llama_ftype_get_default_type)
FILE_TYPES = {
    "F32": "F32", "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q4_0": "Q4_0", "Q4_1": "Q4_1", "Q5_0": "Q5_0",
    "Q5_1": "Q5_1", "Q2_K": "Q2_K", "Q2_K_S": "Q2_K", "Q3_K_S": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_L": "Q3_K",
    "Q4_K_S": "Q4_K", "Q4_K_M": "Q4_K", "Q5_K_S": "Q5_K", "Q5_K_M": "Q5_K", "Q6_K": "Q6_K",
    "IQ1_S": "IQ1_S", "IQ1_M": "IQ1_M", "IQ2_XXS": "IQ2_XXS", "IQ2_XS": "IQ2_XS", "IQ2_S": "IQ2_XS",
    "IQ2_M": "IQ2_S", "IQ3_XXS": "IQ3_XXS", "IQ3_XS": "IQ3_S", "IQ3_S": "IQ3_S", "IQ3_M": "IQ3_S",
    "IQ4_NL": "IQ4_NL", "IQ4_XS": "IQ4_XS", "TQ1_0": "TQ1_0", "TQ2_0": "TQ2_0", "MXFP4_MOE": "MXFP4",
}
_IQ12 = ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M")
_FALLBACK = {**dict.fromkeys(("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_XS"), "IQ4_NL"),
             **dict.fromkeys(("Q2_K", "Q3_K", "TQ1_0", "TQ2_0"), "Q4_0"), "Q4_K": "Q5_0", "Q5_K": "Q5_1",
             "Q6_K": "Q8_0"}
# our tensor roles -> llama.cpp's category (the substring its quantizer matches in the tensor name)
_CATEGORY = {"embedding": "token_embd", "head": "output", "q": "attn_q", "k": "attn_k", "v": "attn_v",
             "o": "attn_output", "kv_b": "attn_v", "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down",
             "expert_gate": "ffn_gate", "expert_up": "ffn_up", "expert_down": "ffn_down",
             "g": "attn_q", "kda_q": "attn_q", "kda_k": "attn_k", "kda_v": "attn_v", "kda_o": "attn_output",
             "index_k": "attn_k"}
_QUANTIZABLE = ("embedding", "head", "matrix", "expert")   # kinds (engine/plan/tensors.py); the rest stay F32


def _more_bits(i: int, n: int) -> bool:
    """llama.cpp's use_more_bits: the first and last eighth of the layers and every third one between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def quantizable(t: Tensor) -> bool:
    return t.kind in _QUANTIZABLE


class _Mixer:
    """llama_tensor_get_type_impl's state: the counters over attn_v-like and ffn_down tensors, in file order."""

    def __init__(self, cfg: ModelConfig, ftype: str, imatrix: bool, tied: bool):
        self.cfg, self.ft, self.imatrix, self.tied = cfg, ftype, imatrix, tied
        self.n_expert = cfg.n_experts or 0
        self.n_gqa = 1 if cfg.mla else cfg.n_heads // cfg.kv_heads
        self.n_layer = cfg.n_layers
        self.n_wv = sum(_CATEGORY.get(t.role) == "attn_v" for t in param_tensors(cfg))
        self.i_wv = self.i_down = 0
        self.is_70b = cfg.n_layers == 80 and cfg.kv_heads < cfg.n_heads    # llama.cpp's LLM_TYPE_70B

    def rule(self, t: Tensor, new: str) -> str:
        """The type for tensor `t`, starting from the file type's default `new` (non-Falcon rules)."""
        ft, cat = self.ft, _CATEGORY.get(t.role, "other")
        if cat == "output" or (self.tied and cat == "token_embd"):
            if ft == "MXFP4_MOE" or not divides(new, t.shape[-1]):
                return "Q8_0"
            if ft in ("IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"):
                return "Q5_K"
            return new if new == "Q8_0" else "Q6_K"
        if ft == "MXFP4_MOE":
            return "MXFP4" if len(t.shape) == 3 and t.shape[0] > 1 else "Q8_0"
        if cat == "token_embd":
            return {"IQ2_XXS": "Q2_K", "IQ2_XS": "Q2_K", "IQ1_S": "Q2_K", "IQ1_M": "Q2_K", "IQ2_S": "IQ3_S",
                    "IQ2_M": "IQ3_S", "IQ3_XXS": "IQ3_S", "TQ1_0": "Q4_K", "TQ2_0": "Q4_K"}.get(ft, new)
        if ft in _IQ12:
            return self._iq12(cat, new)
        if cat == "attn_v":
            return self._attn_v(new)
        if cat == "attn_k":
            return "Q8_0" if self.n_expert == 8 else {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ft, new)
        if cat == "attn_q":
            return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ft, new)
        if cat == "ffn_down":
            return self._ffn_down(t, new)
        if cat == "attn_output":
            if self.n_expert == 8:
                return "Q5_K" if ft in ("Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S",
                                        "Q4_K_M", "IQ3_S", "IQ3_M", "IQ4_XS") else new
            return {"Q2_K": "Q3_K", "IQ3_XXS": "IQ3_S", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K",
                    "IQ3_M": "Q4_K"}.get(ft, new)
        if cat in ("ffn_gate", "ffn_up") and ft == "IQ3_XS":
            i, n = t.layer, self.n_layer
            return "IQ3_XXS" if n // 8 <= i < 7 * n // 8 else new
        return new

    def _iq12(self, cat: str, new: str) -> str:
        ft, s_or_m = self.ft, self.ft in ("IQ2_S", "IQ2_M")
        if cat == "attn_v":
            return "Q4_K" if self.n_gqa >= 4 or self.n_expert >= 4 else ("IQ3_S" if s_or_m else "Q2_K")
        if cat == "attn_k" and self.n_expert == 8:
            return "Q4_K"
        if cat == "ffn_down":
            self.i_down += 1
            return ("IQ3_S" if s_or_m else "Q2_K") if self.i_down - 1 < self.n_layer // 8 else new
        if cat == "attn_output":
            if self.n_expert == 8:
                return "Q5_K"
            return "IQ2_XXS" if ft in ("IQ1_S", "IQ1_M") else "IQ3_S" if s_or_m else new
        return new

    def _attn_v(self, new: str) -> str:
        ft, g4, i, n = self.ft, self.n_gqa >= 4, self.i_wv, self.n_wv
        self.i_wv += 1
        if ft == "Q2_K":
            new = "Q4_K" if g4 else "Q3_K"
        elif ft == "Q2_K_S" and g4:
            new = "Q4_K"
        elif ft == "IQ3_XXS":
            new = "Q4_K" if g4 else "IQ3_XXS" if self.imatrix else "IQ3_S"
        elif ft in ("IQ3_XS", "IQ3_S") and g4:
            new = "Q4_K"
        elif ft == "IQ3_M":
            new = "Q4_K"
        elif ft == "Q3_K_M":
            new = "Q5_K" if i < 2 else "Q4_K"
        elif ft == "Q3_K_L":
            new = "Q5_K"
        elif ft in ("IQ4_NL", "IQ4_XS") and g4:
            new = "Q5_K"
        elif ft in ("Q4_K_M", "Q5_K_M") and _more_bits(i, n):
            new = "Q6_K"
        elif ft == "Q4_K_S" and i < 4:
            new = "Q5_K"
        if self.is_70b and new in ("Q3_K", "Q4_K"):
            new = "Q5_K"
        return "Q8_0" if self.n_expert == 8 else new

    def _ffn_down(self, t: Tensor, new: str) -> str:
        ft, i, n = self.ft, t.layer, self.n_layer
        more = _more_bits(i, n)
        if ft == "Q2_K":
            return "Q3_K"
        if ft == "Q2_K_S":
            return "Q4_K" if i < n // 8 else new
        if ft == "IQ3_XXS" and not self.imatrix:
            return "Q4_K" if i < n // 8 else "Q3_K"
        if ft == "Q3_K_M":
            return "Q5_K" if i < n // 16 else "Q4_K"
        if ft == "IQ3_M" and (i < n // 8 or (self.n_expert == 8 and more)):
            return "Q4_K"
        if ft == "Q3_K_L":
            return "Q5_K"
        if ft == "Q4_K_M":
            return "Q6_K" if more else new
        if i < n // 8 and ft in ("IQ4_NL", "IQ4_XS") and not self.imatrix:
            return "Q5_K"
        if ft == "Q5_K_M" and more:
            return "Q6_K"
        if ft == "Q4_K_S" and i < n // 8:
            return "Q5_K"
        if ft in ("Q4_0", "Q5_0") and self.imatrix and i < n // 8:
            return "Q4_1" if ft == "Q4_0" else "Q5_1"
        return new


def _fallback(t: Tensor, new: str) -> str:
    """tensor_type_fallback: a row the type's blocks do not divide takes a compatible type, else F16."""
    if divides(new, t.shape[-1]):
        return new
    new = _FALLBACK.get(new, "F16")
    return new if divides(new, t.shape[-1]) else "F16"


def file_types(cfg: ModelConfig, ftype: str, imatrix: bool = True) -> dict[str, str]:
    """{tensor name: ggml type} for every parameter tensor of `cfg` in a GGUF file of type `ftype`."""
    if ftype not in FILE_TYPES:
        raise ValueError(f"quant: gguf:{ftype} is not one of " + ", ".join("gguf:" + f for f in FILE_TYPES))
    default = FILE_TYPES[ftype]
    tensors = param_tensors(cfg)
    mixer = _Mixer(cfg, ftype, imatrix, tied=not any(t.role == "head" for t in tensors))
    out = {}
    for t in tensors:        # in layer order, as llama.cpp orders a file's weights (the counters follow it)
        if not quantizable(t):
            out[t.name] = "F32"
        elif TYPES[default].elements == 1:            # F32 / F16 / BF16 files: no mixture
            out[t.name] = default
        else:
            out[t.name] = _fallback(t, mixer.rule(t, default))
    return out


_NEED_IMATRIX = ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS")   # llama.cpp: tensor_requires_imatrix


def needs_imatrix(cfg: ModelConfig, ftype: str) -> bool:
    """Whether llama-quantize refuses to make this file without an importance matrix: a tensor takes a type that
    needs one, or Q2_K in a Q2_K_S file other than token_embd (which llama-quantize exempts; output never gets
    such a type in any mixture)."""
    types = file_types(cfg, ftype, imatrix=True)
    return any(types[t.name] in _NEED_IMATRIX or (ftype == "Q2_K_S" and types[t.name] == "Q2_K"
                                                  and t.role != "embedding") for t in param_tensors(cfg))
