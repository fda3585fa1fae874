"""Qwen3-Next (qwen3_next) and Qwen3.5 (qwen3_5_text, qwen3_5_moe_text; the multimodal qwen3_5 / qwen3_5_moe
configs through their text_config): config.json readers and writers and weight pairs, as transformers 5 computes
them.

Three Gated DeltaNet layers beside every gated-attention layer (layer_types, or full_attention_interval 4 by
default): `gdn` and `full` layers. Attention has QK-norm, a partial rotary embedding (partial_rotary_factor 0.25
by default) and an elementwise output gate held in q_proj: per head [q (head_dim) | gate (head_dim)]
(attn_gate: elementwise). Every norm but the Gated DeltaNet's gated one multiplies by (1 + w) (the "offset"
codec). Qwen3-Next's FFN is an MoE in every decoder_sparse_step-th layer outside mlp_only_layers, with one shared
expert behind a sigmoid gate; Qwen3.5 is dense, Qwen3.5-MoE is MoE everywhere and always renormalises its top-k.
Qwen3-Next fuses the Gated DeltaNet inputs grouped by key head: in_proj_qkvz rows [q k v z] and in_proj_ba rows
[b a] per key head (codecs gdn_qkvz, gdn_ba); Qwen3.5 keeps in_proj_qkv, in_proj_z, in_proj_b, in_proj_a as ours.
Qwen3.5's multimodal RoPE sections give a text token the same position in all three sections: plain RoPE.
"""
from __future__ import annotations

from typing import Any

import torch

from engine.config import ModelConfig
from engine.interop.hf_defaults import DEFAULTS, GATED_ACTS
from engine.interop.hf_moe import _experts, _sparse_layers, moe_ffn_pairs
from engine.interop.hf_moe_export import _routing
from engine.interop.hf_reader import _decoder, _Reader
from engine.interop.hf_writer import _GATED, _decoder as _write_decoder, _Writer
from engine.interop.pair import Pair
from engine.layers.gdn import gdn_dims

_LINEAR = dict(linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
               linear_num_key_heads=16, linear_num_value_heads=32, layer_types=None, hidden_act="silu",
               rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False, attention_dropout=0.0,
               head_dim=256, max_position_embeddings=32768, num_attention_heads=16, output_router_logits=False)
DEFAULTS.update({   # transformers 5.24's Qwen3NextConfig, Qwen3_5TextConfig, Qwen3_5MoeTextConfig
    "qwen3_next": dict(_LINEAR, vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=48,
                       num_key_value_heads=2, decoder_sparse_step=1, moe_intermediate_size=512,
                       shared_expert_intermediate_size=512, num_experts_per_tok=10, num_experts=512,
                       norm_topk_prob=True, router_aux_loss_coef=0.001, mlp_only_layers=[]),
    "qwen3_5_text": dict(_LINEAR, vocab_size=248320, hidden_size=4096, intermediate_size=12288, num_hidden_layers=32,
                         num_key_value_heads=4),
    "qwen3_5_moe_text": dict(_LINEAR, vocab_size=248320, hidden_size=2048, num_hidden_layers=40, num_key_value_heads=2,
                             moe_intermediate_size=512, shared_expert_intermediate_size=512, num_experts_per_tok=8,
                             num_experts=256, router_aux_loss_coef=0.001)})
_STATE_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
_MROPE = ("mrope_section", "mrope_interleaved")


def _strip_mrope(r: _Reader) -> None:
    """Qwen3.5's multimodal RoPE sections: a text token's three positions are equal, which is plain RoPE."""
    params = r.d.get("rope_parameters")
    if isinstance(params, dict) and set(_MROPE) & set(params):
        for key in _MROPE:
            if key in params:
                r.ignore(f"rope_parameters.{key}", "multimodal RoPE sections; a text token has the same position "
                                                   "in every section, which is plain RoPE")
        r.d = {**r.d, "rope_parameters": {k: v for k, v in params.items() if k not in _MROPE}}


def _layer_kinds(r: _Reader, n: int) -> tuple[str, ...]:
    interval = r.d.get("full_attention_interval") or 4
    r.read.add("full_attention_interval")
    types = r.nullable("layer_types") or ["linear_attention" if (i + 1) % interval else "full_attention"
                                          for i in range(n)]
    if len(types) != n or set(types) - {"linear_attention", "full_attention"}:
        r.bad("layer_types", types, f"{n} entries of linear_attention / full_attention")
        return ("full",) * n
    return tuple("gdn" if t == "linear_attention" else "full" for t in types)


def _hybrid(r: _Reader) -> dict[str, Any]:
    """What the three families share: sizes, the gated attention, the Gated DeltaNet layers."""
    _strip_mrope(r)
    base = _decoder(r, partial_ok=True, fraction_default=0.25)   # the config classes default to 0.25
    r.expect("attention_bias", (False,), f"{r.family} puts it on q, k, v and o but not the MLP")
    r.expect("hidden_act", ("silu",), "the Gated DeltaNet convolution applies hidden_act; ours is SiLU")
    if r.d.get("attn_output_gate") is not None:   # Qwen3.5's configs say so; transformers always gates
        r.expect("attn_output_gate", (True,), "transformers' attention always has the output gate")
    if r.d.get("mamba_ssm_dtype") is not None:
        r.read.add("mamba_ssm_dtype")
    ssm = r.d.get("mamba_ssm_dtype")
    if ssm is not None and ssm not in _STATE_DTYPES:
        r.bad("mamba_ssm_dtype", ssm, f"one of {', '.join(_STATE_DTYPES)}")
    for key in ("mtp_num_hidden_layers", "mtp_use_dedicated_embeddings"):
        if key in r.d:
            r.ignore(key, "multi-token-prediction modules, which transformers does not build either")
    for key in ("use_sliding_window", "sliding_window", "max_window_layers"):
        if key in r.d:
            r.ignore(key, f"{r.family} has no sliding window; transformers does not read it")
    return dict(base, ffn="swiglu", bias=False, qk_norm=True, attn_gate="elementwise",
                layer_types=_layer_kinds(r, base["n_layers"]), gdn_k_heads=r("linear_num_key_heads"),
                gdn_v_heads=r("linear_num_value_heads"), gdn_k_dim=r("linear_key_head_dim"),
                gdn_v_dim=r("linear_value_head_dim"), gdn_conv_kernel=r("linear_conv_kernel_dim"),
                state_dtype=_STATE_DTYPES.get(ssm))


def _qwen3_next(r: _Reader) -> dict[str, Any]:
    base = _hybrid(r)
    r.read.add("num_experts")
    if not r("num_experts"):   # transformers: num_experts 0 makes every layer a dense MLP
        r.read.update({"moe_intermediate_size", "num_experts_per_tok", "norm_topk_prob", "decoder_sparse_step",
                       "mlp_only_layers", "shared_expert_intermediate_size", "router_aux_loss_coef",
                       "output_router_logits"})
        return base
    shared = r("shared_expert_intermediate_size")
    if not shared:
        r.bad("shared_expert_intermediate_size", shared, "Qwen3-Next always has a shared expert")
    return dict(base, **_experts(r, "num_experts", "moe_intermediate_size", None),   # its ffn and bias replace base's
                **_sparse_layers(r, base["n_layers"]), n_shared_experts=1, shared_d_ff=shared or None,
                shared_expert_gate=True)


def _qwen3_5_text(r: _Reader) -> dict[str, Any]:
    return _hybrid(r)


def _qwen3_5_moe_text(r: _Reader) -> dict[str, Any]:
    base = _hybrid(r)
    r.read.add("intermediate_size")   # not a Qwen3.5-MoE key (every layer is MoE): _decoder's d_ff is unused
    base = {k: v for k, v in base.items() if k != "d_ff"}   # ffn and bias: _experts' own replace them
    return dict(base, **_experts(r, "num_experts", "moe_intermediate_size", True), n_shared_experts=1,
                shared_d_ff=r("shared_expert_intermediate_size"), shared_expert_gate=True)


READERS = {"qwen3_next": _qwen3_next, "qwen3_5_text": _qwen3_5_text, "qwen3_5_moe_text": _qwen3_5_moe_text}


# ---- writing: ModelConfig -> config.json ---------------------------------------------------------------------
def _write_hybrid(w: _Writer, moe: bool) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", qk_norm=True, moe=moe, hybrid=True, gate="elementwise")
    w.silu_conv("Gated DeltaNet")
    w.no_dropout()
    w.no_window()
    w.need("bias", False)
    w.need("qkv_bias", False)
    w.need("ffn_types", None, "the family places its MoE layers by its own rule")
    w.check(c.layer_types is None or set(c.layer_types) <= {"gdn", "full"}, "layer_types",
            "each layer is Gated DeltaNet (linear_attention) or full attention")
    d = gdn_dims(c)
    out = dict(_routing(w, None, partial=True) if moe else dict(_write_decoder(w, partial=True),
                                                                 hidden_act=w.act(_GATED)),
               linear_num_key_heads=d.k_heads, linear_num_value_heads=d.v_heads,
               linear_key_head_dim=d.k_dim, linear_value_head_dim=d.v_dim, linear_conv_kernel_dim=d.conv_kernel,
               attention_bias=False, layer_types=["linear_attention" if "gdn" in s.mixers else "full_attention"
                                                  for s in c.layer_specs])
    out.pop("norm_topk_prob", None)
    return out


def _write_shared_expert(w: _Writer) -> None:
    w.need("n_shared_experts", 1, "one shared expert")
    w.need("shared_expert_gate", True, "its shared expert is gated")


def _write_qwen3_next(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.need("state_dtype", None, "vLLM keeps its state in the model's dtype; the config has no key for another")
    if c.n_experts is None:
        return dict(_write_hybrid(w, moe=False), num_experts=0)
    _write_shared_expert(w)
    return dict(_write_hybrid(w, moe=True), num_experts=c.n_experts, moe_intermediate_size=c.expert_width,
                shared_expert_intermediate_size=c.shared_width, decoder_sparse_step=c.moe_every,
                mlp_only_layers=list(range(c.moe_first_dense or 0)), norm_topk_prob=c.router_renorm)


def _state(c: ModelConfig) -> dict[str, Any]:
    names = {v: k for k, v in _STATE_DTYPES.items()}
    return {} if c.state_dtype is None else {"mamba_ssm_dtype": names[c.state_dtype]}


def _write_qwen3_5_text(w: _Writer) -> dict[str, Any]:
    return dict(_write_hybrid(w, moe=False), **_state(w.cfg))


def _write_qwen3_5_moe_text(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    _write_shared_expert(w)
    w.need("moe_every", 1, "every layer is MoE")
    w.need("moe_first_dense", None, "every layer is MoE")
    w.need("router_renorm", True, "Qwen3.5-MoE always renormalises its top-k")
    out = dict(_write_hybrid(w, moe=True), num_experts=c.n_experts, moe_intermediate_size=c.expert_width,
               shared_expert_intermediate_size=c.shared_width, **_state(c))
    del out["intermediate_size"]
    return out


WRITERS = {"qwen3_next": _write_qwen3_next, "qwen3_5_text": _write_qwen3_5_text,
           "qwen3_5_moe_text": _write_qwen3_5_moe_text}


# ---- weights ---------------------------------------------------------------------------------------------------
def qwen_hybrid_pairs(cfg: ModelConfig, family: str) -> list[Pair]:
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.norm", ("final_norm",), "offset")]
    for i, spec in enumerate(cfg.layer_specs):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs += [Pair(h + "input_layernorm", (o + "norm1",), "offset"),
                  Pair(h + "post_attention_layernorm", (o + "norm2",), "offset")]
        if spec.attention:
            a = h + "self_attn."
            pairs += [Pair(a + "q_proj", (o + "attn.q_proj", o + "attn.g_proj"), "q_gate")]
            pairs += [Pair(f"{a}{x}_proj", (f"{o}attn.{x}_proj",), "copy") for x in "kvo"]
            pairs += [Pair(f"{a}{x}_norm", (f"{o}attn.{x}_norm",), "offset") for x in "qk"]
        else:
            a, g = h + "linear_attn.", o + "gdn."
            if family == "qwen3_next":
                pairs += [Pair(a + "in_proj_qkvz", (g + "in_proj_qkv", g + "in_proj_z"), "gdn_qkvz"),
                          Pair(a + "in_proj_ba", (g + "in_proj_b", g + "in_proj_a"), "gdn_ba")]
            else:
                pairs += [Pair(f"{a}in_proj_{x}", (f"{g}in_proj_{x}",), "copy") for x in ("qkv", "z", "b", "a")]
            pairs += [Pair(a + "conv1d", (g + "conv1d",), "copy"), Pair(a + "out_proj", (g + "out_proj",), "copy"),
                      Pair(a + "dt_bias", (g + "dt_bias",), "copy", raw=True),
                      Pair(a + "A_log", (g + "A_log",), "copy", raw=True),
                      Pair(a + "norm.weight", (g + "norm_weight",), "copy", raw=True)]
        pairs += moe_ffn_pairs(cfg, h, o, spec.ffn == "moe")
    return pairs


def _q_gate_split(t: torch.Tensor, cfg: ModelConfig) -> list[torch.Tensor]:
    """q_proj rows per head [q (head_dim) | gate (head_dim)] -> q rows, gate rows."""
    x = t.reshape(cfg.n_heads, 2, cfg.head_width, *t.shape[1:])
    return [x[:, 0].reshape(cfg.attn_width, *t.shape[1:]).contiguous(),
            x[:, 1].reshape(cfg.attn_width, *t.shape[1:]).contiguous()]


def _q_gate_join(ts: list[torch.Tensor], cfg: ModelConfig) -> torch.Tensor:
    rest = ts[0].shape[1:]
    q, g = (t.reshape(cfg.n_heads, 1, cfg.head_width, *rest) for t in ts)
    return torch.cat([q, g], dim=1).reshape(-1, *rest)


def _grouped_sizes(cfg: ModelConfig, parts: str) -> tuple[int, list[int]]:
    """Per key head, the rows of each part: q, k (dk each), v, z (r dv each), b, a (r each); r = nv / nk."""
    d = gdn_dims(cfg)
    r = d.v_heads // d.k_heads
    size = {"q": d.k_dim, "k": d.k_dim, "v": r * d.v_dim, "z": r * d.v_dim, "b": r, "a": r}
    return d.k_heads, [size[p] for p in parts]


def _qkvz_split(t: torch.Tensor, cfg: ModelConfig) -> list[torch.Tensor]:
    nk, sizes = _grouped_sizes(cfg, "qkvz")
    q, k, v, z = t.reshape(nk, sum(sizes), -1).split(sizes, dim=1)
    flat = [x.reshape(-1, t.shape[1]) for x in (q, k, v, z)]
    return [torch.cat(flat[:3]).contiguous(), flat[3].contiguous()]


def _qkvz_join(ts: list[torch.Tensor], cfg: ModelConfig) -> torch.Tensor:
    nk, (dk, _, rv, _) = _grouped_sizes(cfg, "qkvz")
    cols = ts[0].shape[1]
    q, k, v = ts[0].split([nk * dk, nk * dk, nk * rv])
    parts = [x.reshape(nk, -1, cols) for x in (q, k, v, ts[1])]
    return torch.cat(parts, dim=1).reshape(-1, cols)


def _ba_split(t: torch.Tensor, cfg: ModelConfig) -> list[torch.Tensor]:
    nk, sizes = _grouped_sizes(cfg, "ba")
    return [x.reshape(-1, t.shape[1]).contiguous() for x in t.reshape(nk, sum(sizes), -1).split(sizes, dim=1)]


def _ba_join(ts: list[torch.Tensor], cfg: ModelConfig) -> torch.Tensor:
    nk, _ = _grouped_sizes(cfg, "ba")
    cols = ts[0].shape[1]
    return torch.cat([x.reshape(nk, -1, cols) for x in ts], dim=1).reshape(-1, cols)


CODECS = {"q_gate": (_q_gate_split, _q_gate_join), "gdn_qkvz": (_qkvz_split, _qkvz_join),
          "gdn_ba": (_ba_split, _ba_join)}
