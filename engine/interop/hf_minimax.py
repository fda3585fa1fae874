"""MiniMax-01 (minimax): config.json reader and writer and weight pairs, as transformers 5 computes it.

Lightning attention layers (`lightning`, engine/layers/lightning.py) beside softmax attention (layer_types:
linear_attention / full_attention; transformers alternates them, starting with full attention, when none is
given), a Mixtral MoE in every layer. The block keeps the residual after the norm:

    a = N1(h);  h' = alpha a + beta Attn(a);  b = N2(h');  h'' = alpha b + beta MoE(b)

which is our post-norm block with residual_alpha (x <- N(alpha x + F(x)), DeepNorm) once the norms are read one
step later: the first layer's input_layernorm is our embed_norm, layer i's post_attention_layernorm our
blocks[i].norm1, layer i+1's input_layernorm our blocks[i].norm2 (the last layer's: the final norm, so
final_norm is off). The three alpha factors must agree and the betas be 1 (one residual_alpha). transformers
rotates the whole head (a published rotary_dim is not read) and builds the lightning norm with eps 1e-6; its
decay tables (slope_rate, query_decay, key_decay, diagonal_decay) are buffers derived from the layer's depth:
read into our `slope`, the other three recomputed on export.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any

import torch

from engine.config import ModelConfig
from engine.interop.hf_defaults import DEFAULTS, GATED_ACTS
from engine.interop.hf_moe import _experts, moe_ffn_pairs
from engine.interop.hf_moe_export import _routing
from engine.interop.hf_reader import _decoder, _Reader
from engine.interop.hf_writer import _Writer
from engine.interop.pair import Pair

DEFAULTS["minimax"] = dict(   # transformers 5.24's MiniMaxConfig
    vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=8, head_dim=None, hidden_act="silu", max_position_embeddings=4096 * 32, rms_norm_eps=1e-5,
    tie_word_embeddings=False, sliding_window=None, attention_dropout=0.0, num_experts_per_tok=2,
    num_local_experts=8, router_aux_loss_coef=0.001, router_jitter_noise=0.0, block_size=256, rope_theta=1e6,
    full_attn_alpha_factor=1, full_attn_beta_factor=1, linear_attn_alpha_factor=1, linear_attn_beta_factor=1,
    mlp_alpha_factor=1, mlp_beta_factor=1)
_ALPHAS = ("full_attn_alpha_factor", "linear_attn_alpha_factor", "mlp_alpha_factor")
_BETAS = ("full_attn_beta_factor", "linear_attn_beta_factor", "mlp_beta_factor")
_LEGACY = {"attn_type_list": "layer_types", "layernorm_full_attention_alpha": "full_attn_alpha_factor",
           "layernorm_linear_attention_alpha": "linear_attn_alpha_factor", "layernorm_mlp_alpha": "mlp_alpha_factor",
           "layernorm_full_attention_beta": "full_attn_beta_factor",
           "layernorm_linear_attention_beta": "linear_attn_beta_factor", "layernorm_mlp_beta": "mlp_beta_factor"}


def _layer_kinds(r: _Reader, n: int, window: int | None) -> tuple[str, ...]:
    types = r.nullable("layer_types") or ["full_attention" if i % 2 == 0 else "linear_attention" for i in range(n)]
    if len(types) != n or set(types) - {"linear_attention", "full_attention"}:
        r.bad("layer_types", types, f"{n} entries of linear_attention / full_attention")
        return ("full",) * n
    attention = "full" if window is None else "sliding"   # transformers' window reaches every attention layer
    return tuple("lightning" if t == "linear_attention" else attention for t in types)


def _minimax(r: _Reader) -> dict[str, Any]:
    for key, new in _LEGACY.items():   # the remote code's names: transformers 5.24 reads none of them
        if key in r.d:
            r.read.add(key)
            r.bad(key, r.d[key], f"the remote code's key; transformers reads {new} instead")
    r.expect("router_jitter_noise", (0.0,), "training-time input jitter of the router is not modelled")
    alphas, betas = [float(r(k)) for k in _ALPHAS], [float(r(k)) for k in _BETAS]
    if len(set(alphas)) > 1:
        r.bad(_ALPHAS[0], alphas[0], f"one residual_alpha: {', '.join(_ALPHAS)} must agree")
    for key, beta in zip(_BETAS, betas):
        if beta != 1:
            r.bad(key, beta, "branch outputs are added unscaled")
    if not alphas[0] > 0:
        r.bad(_ALPHAS[0], alphas[0], "a residual scale above 0")
    ffn = r.act("hidden_act", GATED_ACTS)
    if ffn != "swiglu":
        r.bad("hidden_act", r("hidden_act"), "lightning attention applies hidden_act to q, k, v; ours is SiLU")
    for key, why in (("rotary_dim", "transformers rotates the whole head (its rotary embedding never reads it)"),
                     ("postnorm", "transformers always takes the residual after the norm"),
                     ("shared_intermediate_size", "transformers builds no shared expert"),
                     ("shared_moe_mode", "transformers builds no shared expert")):
        if key in r.d:
            r.ignore(key, why)
    base = _decoder(r, theta_default=1e6)
    window = r.nullable("sliding_window")
    experts = _experts(r, "num_local_experts", "intermediate_size", True)
    return dict(base, **experts, norm_placement="post", embed_norm=True, final_norm=False,
                residual_alpha=alphas[0] if alphas[0] > 0 else 1.0, attn_window=window,
                layer_types=_layer_kinds(r, base["n_layers"], window), gdn_chunk=r("block_size"))


READERS = {"minimax": _minimax}


# ---- writing: ModelConfig -> config.json ---------------------------------------------------------------------
def _write_minimax(w: _Writer) -> dict[str, Any]:
    c = w.cfg
    w.common("rmsnorm", "post", moe=True, hybrid=True, embed_norm=True, final_norm=False, residual_alpha=True)
    w.need("ffn", "swiglu", "lightning attention applies hidden_act to q, k, v; ours is SiLU")
    w.need("bias", False)
    w.need("qkv_bias", False)
    w.need("state_dtype", None, "the config has no key for the state's dtype")
    w.need("ffn_types", None, "every layer is MoE")
    w.need("moe_first_dense", None, "every layer is MoE")
    w.need("moe_every", 1, "every layer is MoE")
    w.need("n_shared_experts", None, "no shared experts")
    w.check(c.expert_width == c.ffn_width, "expert_d_ff", "experts use intermediate_size")
    words = {"lightning", "full" if c.attn_window is None else "sliding"}
    w.check(c.layer_types is not None and set(c.layer_types) <= words, "layer_types",
            "each layer is lightning or softmax attention, the window (if any) on every attention layer")
    w.check(c.global_every is None or c.layer_types is not None, "global_every", "one window for every layer")
    out = _routing(w, True)
    del out["norm_topk_prob"]
    alpha = {k: c.residual_alpha for k in _ALPHAS}
    return dict(out, **alpha, **{k: 1.0 for k in _BETAS}, num_local_experts=c.n_experts,
                sliding_window=c.attn_window, block_size=c.gdn_chunk,
                layer_types=["linear_attention" if "lightning" in s.mixers else "full_attention"
                             for s in c.layer_specs])


WRITERS = {"minimax": _write_minimax}


# ---- weights ---------------------------------------------------------------------------------------------------
def minimax_pairs(cfg: ModelConfig) -> list[Pair]:
    """The norms one step later (see the module docstring); lightning's decay tables from our `slope`."""
    n = cfg.n_layers
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"),
             Pair("model.layers.0.input_layernorm", ("emb_norm",), "copy"),
             Pair("model.norm", (f"blocks.{n - 1}.norm2",), "copy")]
    for i, spec in enumerate(cfg.layer_specs):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs.append(Pair(h + "post_attention_layernorm", (o + "norm1",), "copy"))
        if i + 1 < n:
            pairs.append(Pair(f"model.layers.{i + 1}.input_layernorm", (o + "norm2",), "copy"))
        a = h + "self_attn."
        if spec.attention:
            pairs += [Pair(f"{a}{x}_proj", (f"{o}attn.{x}_proj",), "copy") for x in "qkvo"]
        else:
            pairs += [Pair(a + x, (f"{o}lightning.{x}",), "copy") for x in ("qkv_proj", "output_gate", "out_proj")]
            pairs += [Pair(a + "norm.weight", (o + "lightning.norm_weight",), "copy", raw=True)]
            pairs += [Pair(a + t, (o + "lightning.slope",), f"lightning_{t}", raw=True)
                      for t in ("slope_rate", "query_decay", "key_decay", "diagonal_decay")]
        pairs += moe_ffn_pairs(cfg, h, o, True)
    return pairs


def _tables(slope: torch.Tensor, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """transformers' decay buffers of one layer from its rates (MiniMaxLightningAttention.decay_factors)."""
    rate, i = slope.reshape(-1, 1, 1), torch.arange(cfg.gdn_chunk, device=slope.device) + 1
    diff = rate * (i[:, None] - i[None, :])
    return {"slope_rate": rate, "query_decay": torch.exp(-rate * i[:, None]),
            "key_decay": torch.exp(-rate * (cfg.gdn_chunk - i[:, None])),
            "diagonal_decay": torch.exp(torch.where(diff >= 0, -diff, -math.inf))[None]}


def _read_buffer(name: str, t: torch.Tensor, cfg: ModelConfig) -> list[torch.Tensor]:
    """slope_rate [H, 1, 1] -> our slope [H]; the three tables: nothing to read (derived from it)."""
    return [t.reshape(-1)] if name == "slope_rate" else []


def _write_buffer(name: str, ts: list[torch.Tensor], cfg: ModelConfig) -> torch.Tensor:
    """One of transformers' buffers, computed from our slope (ts[0]); in its dtype, as _tables keeps it."""
    return _tables(ts[0], cfg)[name]


# named functions called at conversion time (not lambdas made at import), so the tests that convert reach them
CODECS = {f"lightning_{t}": (partial(_read_buffer, t), partial(_write_buffer, t))
          for t in ("slope_rate", "query_decay", "key_decay", "diagonal_decay")}
