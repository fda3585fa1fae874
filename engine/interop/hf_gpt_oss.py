"""gpt-oss (gpt_oss): config.json reader, writer and weight pairs, as transformers 5's GptOss* classes compute.

Every layer is MoE: a router with a bias picks the top-k logits and softmaxes over them (topk_softmax), the
experts carry biases and apply the clamped SwiGLU (ffn swiglu_clamped, swiglu_limit, swiglu_alpha), the
attention has biases on q, k, v and o, a learned sink per head (attn_sinks) and alternates sliding and full
layers (layer_types); RoPE is YaRN, head_dim independent of hidden_size. transformers ignores `hidden_act`
(the experts' unit is fixed), `experts_per_token` and `initial_context_length` (duplicates of
num_experts_per_tok and the YaRN original context that OpenAI's own code reads).

quantization_config: the published checkpoints store the expert matrices in MXFP4 (4-bit blocks with a shared
scale); transformers dequantizes them, or runs MXFP4 kernels, on the same architecture. The parameter count
is that of the model transformers builds from the config (bf16 tensors of the same shapes); the storage is
read into the checkpoint fields (engine/interop/hf_quant.py) that `plan --quant checkpoint` sizes.
Experts are stored transposed with gate and up interleaved: gate_up_proj [E, d, 2f] (column 2i gate,
2i+1 up), down_proj [E, f, d].
"""
from __future__ import annotations

from typing import Any

from engine.config import ModelConfig
from engine.interop.hf_defaults import DEFAULTS
from engine.interop.hf_reader import _decoder, _layer_windows, _Reader
from engine.interop.hf_writer import _decoder as _write_decoder, _Writer
from engine.interop.pair import Pair

# transformers 5 GptOssConfig defaults (the published gpt-oss-120b sizes); no rope mapping means this YaRN
DEFAULTS["gpt_oss"] = dict(
    vocab_size=201088, hidden_size=2880, intermediate_size=2880, head_dim=64, num_attention_heads=64,
    num_key_value_heads=8, num_hidden_layers=36, num_local_experts=128, num_experts_per_tok=4, sliding_window=128,
    tie_word_embeddings=False, max_position_embeddings=131072, rms_norm_eps=1e-5, attention_dropout=0.0,
    swiglu_alpha=1.702, swiglu_limit=7.0, router_aux_loss_coef=0.001, output_router_logits=False,
    layer_types=None, attention_bias=True, rope_theta=150000.0, hidden_act="silu")
_YARN = dict(rope_type="yarn", factor=32.0, beta_fast=32.0, beta_slow=1.0, truncate=False,
             original_max_position_embeddings=4096)
_UNREAD = {"hidden_act": "gpt-oss experts always apply the clamped SwiGLU; GptOssConfig's hidden_act is unused",
           "experts_per_token": "OpenAI's name for num_experts_per_tok; transformers reads the latter",
           "initial_context_length": "OpenAI's name for the YaRN original context; transformers reads "
                                     "rope_scaling.original_max_position_embeddings"}


def _gpt_oss(r: _Reader) -> dict[str, Any]:
    if not r.d.get("rope_scaling") and not r.d.get("rope_parameters"):   # GptOssConfig's default RoPE
        r.d = {**r.d, "rope_parameters": dict(_YARN)}   # its theta: rope_theta, as rope_fields reads it
    base = _decoder(r)   # its theta default is DEFAULTS' 150000
    n = base["n_layers"]
    default = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    base.update(_layer_windows(r, n, r.nullable("sliding_window"), default))
    key = "num_experts" if "num_experts" in r.d and "num_local_experts" not in r.d else "num_local_experts"
    r.read.update({"num_experts", "num_local_experts", "output_router_logits"})
    for k, why in _UNREAD.items():
        if k in r.d:
            r.ignore(k, why)
    width = r("intermediate_size")
    return dict(base, n_experts=r(key), experts_per_token=r("num_experts_per_tok"), expert_d_ff=width,
                router="topk_softmax", router_renorm=True, expert_bias=True,
                aux_loss_coef=float(r("router_aux_loss_coef")), ffn="swiglu_clamped",
                swiglu_limit=float(r("swiglu_limit")), swiglu_alpha=float(r("swiglu_alpha")),
                attn_sinks=True, bias=bool(r("attention_bias")))   # every layer is MoE: `bias` is the attention's


READERS = {"gpt_oss": _gpt_oss}


def _write_gpt_oss(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", moe=True, sinks=True)
    w.check(c.n_experts is not None, "n_experts", "gpt-oss is a mixture of experts")
    w.no_dropout()
    for field, value in (("ffn", "swiglu_clamped"), ("router", "topk_softmax"), ("expert_bias", True),
                         ("router_selection_bias", False), ("router_groups", 1), ("routed_scale", 1.0),
                         ("n_shared_experts", None), ("moe_first_dense", None), ("moe_every", 1)):
        w.need(field, value, "gpt-oss's MoE")
    w.check(c.bias or not c.qkv_bias, "qkv_bias", "attention_bias covers q, k, v and o alike")
    w.check(c.expert_width == c.ffn_width, "expert_d_ff", "experts use intermediate_size")
    layer_types = ["full_attention" if x is None else "sliding_attention" for x in c.layer_windows]
    return dict(_write_decoder(w), num_local_experts=c.n_experts, num_experts_per_tok=c.experts_per_token,
                router_aux_loss_coef=c.aux_loss_coef, swiglu_limit=c.swiglu_limit, swiglu_alpha=c.swiglu_alpha,
                attention_bias=c.bias, sliding_window=c.attn_window, layer_types=layer_types)


WRITERS = {"gpt_oss": _write_gpt_oss}


def gpt_oss_pairs(cfg: ModelConfig) -> list[Pair]:
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.norm", ("final_norm",), "copy")]
    for i in range(cfg.n_layers):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs += [Pair(f"{h}self_attn.{x}_proj", (f"{o}attn.{x}_proj",), "copy") for x in "qkvo"]
        e = o + "ffn.experts."
        pairs += [Pair(h + "self_attn.sinks", (o + "attn.sinks",), "copy", raw=True),
                  Pair(h + "input_layernorm", (o + "norm1",), "copy"),
                  Pair(h + "post_attention_layernorm", (o + "norm2",), "copy"),
                  Pair(h + "mlp.router", (o + "ffn.router",), "copy"),
                  Pair(h + "mlp.experts.gate_up_proj", (e + "gate", e + "up"), "interleaved", raw=True),
                  Pair(h + "mlp.experts.gate_up_proj_bias", (e + "gate_bias", e + "up_bias"), "interleaved",
                       raw=True),
                  Pair(h + "mlp.experts.down_proj", (e + "down",), "experts_t", raw=True),
                  Pair(h + "mlp.experts.down_proj_bias", (e + "down_bias",), "copy", raw=True)]
    return pairs
