"""The shared writing of a Hugging Face config.json: `_Writer` (collects what one family cannot express), the
activation names, RoPE scaling parameters and the sizes every Llama-like family shares. The dense writers
(hf_export.py), the MoE writers (hf_moe_export.py) and the DeepSeek writer build on it."""
from __future__ import annotations

import math
from typing import Any

from engine.config import ModelConfig
from engine.layers.norm import has_bias as norm_has_bias

_GATED = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_pytorch_tanh", "reglu": "relu"}
_DENSE = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu", "silu": "silu"}


class _Writer:
    """Collects the fields of `cfg` that one family cannot express, one problem per field: the first reason
    found (several rules of a family may refuse one value, e.g. DeepSeek's MLA and RoPE both need position rope)."""

    def __init__(self, cfg: ModelConfig, family: str):
        self.cfg, self.family, self.problems = cfg, family, []
        self._named: set[str] = set()

    def need(self, field: str, allowed: Any, why: str = "") -> None:
        value = getattr(self.cfg, field)
        self.check(value in allowed if isinstance(allowed, tuple) else value == allowed, field, why)

    def check(self, ok: bool, field: str, why: str) -> None:
        if not ok and field not in self._named:
            self._named.add(field)
            note = f" ({why})" if why else ""
            self.problems.append(f"{field}: {getattr(self.cfg, field)!r} is not expressible in {self.family}{note}")

    def common(self, norm: str, placement: str = "pre", *, embed_scale: bool = False, qk_norm: bool = False,
               softcaps: bool = False, moe: bool = False, qk_scope: str = "head", mla: bool = False,
               sinks: bool = False, mtp: bool = False, hybrid: bool = False, gate: str | None = None,
               embed_norm: bool = False, final_norm: bool = True, residual_alpha: bool = False,
               nope: bool = False, chunk: bool = False, temperature: bool = False, scales_input: bool = False,
               selection_param: bool = False, local_rope: bool = False, embed_dropout: bool = True,
               scales: bool = False, dsa: bool = False) -> None:
        """What every supported family shares (a final norm, no embedding norm, learned gains) and the
        features only some have, off unless the family passes them: hybrid layer kinds (layer_types beyond
        attention, ffn_types), and the branch, embedding and logit multipliers (scales); residual_alpha: any alpha
        is expressible."""
        c = self.cfg
        if not hybrid:
            self.check(not c.hybrid, "layer_types", "every layer is softmax attention and an FFN")
            self.need("ffn_types", None, "the family places its MoE layers by its own rule")
        self.need("attn_gate", gate, "no attention output gate" if gate is None else "")
        if not chunk:
            self.check(not (c.layer_types and "chunked" in c.layer_types), "layer_types", "no chunked attention")
        if not temperature:
            self.need("attn_temperature", None, "no long-context query temperature")
        if moe and not scales_input:
            self.need("router_scales_input", False, "router weights scale the experts' outputs")
        if moe and c.router_selection_bias and not selection_param:
            self.need("selection_bias_parameter", False, "the selection bias is a buffer")
        if embed_dropout:
            self.check(c.embed_dropout or c.dropout == 0, "embed_dropout", "its dropout also drops embeddings")
        if not scales:
            for field in ("attn_out_scale", "ffn_gate_scale", "ffn_out_scale", "embed_multiplier"):
                self.need(field, 1.0, "no multipliers on the branches or the embedding")
        if not moe:
            self.need("n_experts", None, "a dense family")
        if not mla:
            self.need("kv_lora_rank", None, "no latent attention (MLA)")
        if not dsa:
            self.need("index_topk", None, "dense attention (no lightning indexer)")
        if not mtp:
            self.need("mtp_depth", None, "no multi-token-prediction modules")
        if self.cfg.qk_norm:
            self.need("qk_norm_scope", qk_scope)
        self.need("norm", norm)
        self.need("norm_placement", placement)
        self.need("final_norm", final_norm)
        self.need("embed_norm", embed_norm)
        if not residual_alpha:
            self.need("residual_alpha", 1.0, "the residual is added as it is")
        self.need("norm_affine", True)
        if norm == "layernorm":
            self.check(norm_has_bias(self.cfg), "norm_bias", "its LayerNorms have a bias")
        self.need("embed_scale", embed_scale)
        self.need("head_bias", False, "no bias on the output head")
        if not scales:
            self.need("logit_scale", 1.0, "logits are not rescaled")
        self.need("qk_norm", qk_norm)
        self.need("attn_sinks", sinks, "no attention sinks" if not sinks else "")
        if not local_rope:
            self.need("rope_local_base", None, "one RoPE for every layer")
        if not nope:
            self.need("nope_layers", None, "RoPE in every layer")
        if not softcaps:   # the Gemma-2 writer states query_pre_attn_scalar
            self.need("attn_scale", None, "scores scaled by 1/sqrt(head_dim)")
        if not softcaps:
            self.need("attn_softcap", None)
            self.need("logit_softcap", None)

    def act(self, table: dict[str, str]) -> str:
        self.need("ffn", tuple(table), f"supported: {', '.join(table)}")
        return table.get(self.cfg.ffn, "")

    def rope(self, partial: bool = False) -> dict[str, Any]:
        cfg = self.cfg
        self.need("position", "rope")
        if not partial:
            self.need("rope_fraction", 1.0, "rotates the whole head")
        params = {"rope_type": "default", "rope_theta": cfg.rope_base}
        if partial:
            frac = cfg.rotary_dim / cfg.head_width
            if int(cfg.head_width * frac) != cfg.rotary_dim:   # transformers truncates head_dim * fraction
                frac = math.nextafter(frac, 1.0)
            params["partial_rotary_factor"] = frac
        if cfg.rope_scaling == "dynamic":
            self.check(cfg.rope_original_context in (None, cfg.context_length), "rope_original_context",
                       "dynamic scaling starts at max_position_embeddings")
        return {"rope_parameters": {**params, **scaling_params(cfg)}, "max_position_embeddings": cfg.context_length}

    def silu_conv(self, mixer: str) -> None:
        """The family's `mixer` convolution applies hidden_act as well: only SiLU (our swiglu) is modelled."""
        self.need("ffn", "swiglu", f"the {mixer} convolution applies hidden_act too; ours is SiLU")

    def no_window(self) -> None:
        self.need("attn_window", None, "no sliding window")

    def mha_only(self) -> None:
        self.check(self.cfg.kv_heads == self.cfg.n_heads, "n_kv_heads", "one key/value head per query head")
        self.check(self.cfg.attn_width == self.cfg.d_model, "head_dim", "heads * head_dim must equal d_model")

    def no_dropout(self) -> None:
        self.need("dropout", 0.0, "dropout only on attention probabilities")


def scaling_params(cfg: ModelConfig) -> dict[str, Any]:
    """The rope_parameters entries of cfg's RoPE scaling (none: nothing)."""
    kind = cfg.rope_scaling
    if kind == "none":
        return {}
    out: dict[str, Any] = {"rope_type": kind, "factor": cfg.rope_factor}
    if kind in ("llama3", "yarn", "longrope"):
        out["original_max_position_embeddings"] = cfg.rope_original_context or cfg.context_length
    if kind == "llama3":
        out.update(low_freq_factor=cfg.rope_low_freq_factor, high_freq_factor=cfg.rope_high_freq_factor)
    if kind == "yarn":
        out.update(beta_fast=cfg.rope_beta_fast, beta_slow=cfg.rope_beta_slow, truncate=cfg.rope_truncate)
        if cfg.rope_mscale_all_dim is not None and cfg.mla:   # DeepSeek's softmax correction (ignored without)
            out["mscale_all_dim"] = cfg.rope_mscale_all_dim
    if kind == "longrope":
        out.update(short_factor=list(cfg.rope_short_factor), long_factor=list(cfg.rope_long_factor))
    if kind in ("yarn", "longrope") and cfg.rope_attention_factor is not None:
        out["attention_factor"] = cfg.rope_attention_factor
    return out


def _decoder(w: _Writer, partial: bool = False) -> dict[str, Any]:
    c = w.cfg
    w.need("block", "serial")
    return dict(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.ffn_width,
                num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.kv_heads,
                head_dim=c.head_width, rms_norm_eps=c.norm_eps, tie_word_embeddings=c.tie_embeddings,
                attention_dropout=0.0, **w.rope(partial))
