"""config.json readers of the dense 2025-26 families, as transformers 5.24 builds them: smollm3, olmo3, seed_oss,
exaone4, ernie4_5, ministral3 and qwen3_vl_text (Qwen3-VL's language model, read through hf_wrappers.py).

  smollm3     Llama with NoPE layers: no_rope_layers (1 rotates, 0 does not; default every 4th layer NoPE)
  olmo3       OLMo-2 with sliding windows (every 4th layer full) and RoPE per layer type (scaling on full layers)
  seed_oss    biases on q, k, v (attention_out_bias, mlp_bias apart), dropout on attention weights and branch
              outputs but not on the embeddings
  exaone4     OLMo-2 placement (norms on the branch outputs), per-head QK-norm, windows from layer_types (or an
              integer sliding_window_pattern); with windows the full layers are NoPE
  ernie4_5    Llama with RoPE on adjacent pairs (weights permuted on import) and use_bias on every linear layer
  ministral3  Mistral with YaRN and Llama 4's query temperature 1 + beta*ln(1 + floor(p / L0)) on every layer
              (rope_parameters.llama_4_scaling_beta, L0 its original_max_position_embeddings)
  qwen3_vl_text  Qwen3 with interleaved M-RoPE: with text alone its three position streams are equal, so it
              is plain RoPE
"""
from __future__ import annotations

from typing import Any

from engine.interop.hf_defaults import _LLAMA, DEFAULTS, GATED_ACTS
from engine.interop.hf_llama_like import _llama, _mistral, _olmo2
from engine.interop.hf_reader import _decoder, _layer_windows, _Reader, _same_dropout

DEFAULTS.update({
    "smollm3": dict(_LLAMA, vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                    num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=32768,
                    rope_theta=2000000.0, use_sliding_window=False, sliding_window=None, no_rope_layers=None,
                    no_rope_layer_interval=4, layer_types=None, tie_word_embeddings=True),
    "olmo3": dict(_LLAMA, vocab_size=50304, num_key_value_heads=None, rms_norm_eps=1e-5, rope_theta=500000.0,
                  sliding_window=4096, layer_types=None),
    "seed_oss": dict(_LLAMA, vocab_size=155136, intermediate_size=27648, num_hidden_layers=64, num_attention_heads=80,
                     num_key_value_heads=8, max_position_embeddings=524288, attention_bias=True,
                     attention_out_bias=False, attention_dropout=0.1, residual_dropout=0.1, head_dim=128),
    "exaone4": dict(_LLAMA, vocab_size=102400, intermediate_size=16384, num_key_value_heads=32, rms_norm_eps=1e-5,
                    sliding_window=4096, sliding_window_pattern=4, layer_types=None),
    "ernie4_5": dict(_LLAMA, vocab_size=103424, hidden_size=1024, intermediate_size=3072, num_hidden_layers=18,
                     num_attention_heads=16, num_key_value_heads=2, max_position_embeddings=131072,
                     rms_norm_eps=1e-5, tie_word_embeddings=True, use_bias=False, head_dim=128, rope_theta=500000.0),
    "ministral3": dict(_LLAMA, vocab_size=131072, intermediate_size=14336, num_hidden_layers=34,
                       num_key_value_heads=8, head_dim=128, max_position_embeddings=262144, rms_norm_eps=1e-5,
                       sliding_window=None),
    "qwen3_vl_text": dict(_LLAMA, vocab_size=151936, intermediate_size=22016, num_key_value_heads=32, head_dim=128,
                          max_position_embeddings=128000, rope_theta=500000.0),
})
# Ministral3Config's RoPE when rope_parameters is not given (less the copy of max_position_embeddings the class
# adds, which YaRN does not read: a file without rope_parameters is not told about a key it does not have)
_MINISTRAL3_ROPE = dict(type="yarn", rope_type="yarn", rope_theta=1000000.0, factor=16.0,
                        original_max_position_embeddings=16384, beta_fast=32.0, beta_slow=1.0, mscale_all_dim=1.0,
                        mscale=1.0, llama_4_scaling_beta=0.1)


def nope_layers(r: _Reader, n: int, empty_is_default: bool = False) -> tuple[int, ...] | None:
    """no_rope_layers (1 = RoPE, 0 = NoPE, one per layer at least) as our 1-based nope_layers; absent (or empty,
    for Llama 4) every no_rope_layer_interval-th layer is NoPE."""
    flags = r.nullable("no_rope_layers")
    r.read.add("no_rope_layer_interval")
    if flags is None or (empty_is_default and not flags):
        k = r("no_rope_layer_interval")
        flags = [int((i + 1) % k != 0) for i in range(n)]
    if len(flags) < n or any(f not in (0, 1) for f in flags):
        r.bad("no_rope_layers", flags, f"one 1 (RoPE) or 0 (NoPE) for each of the {n} layers")
        return None
    return tuple(i + 1 for i in range(n) if not flags[i]) or None


def _smollm3(r: _Reader) -> dict[str, Any]:
    base = _llama(r)
    n = base["n_layers"]
    nope = nope_layers(r, n)
    use, window = r("use_sliding_window"), r.nullable("sliding_window")
    default = ["sliding_attention" if use and window is not None and nope and i + 1 in nope else "full_attention"
               for i in range(n)]
    windows = _layer_windows(r, n, window, default)
    if windows["attn_window"] is not None and not use:   # the mask would slide, flash attention would not
        r.bad("use_sliding_window", use, "layer_types has sliding layers; transformers' kernels disagree then")
    return dict(base, nope_layers=nope, **windows)


def _per_type_rope(r: _Reader, theta: float) -> None:
    """Olmo3Config's RoPE: one mapping per layer type; a legacy rope_scaling applies to the full layers only,
    rope_theta to both."""
    params = r.d.get("rope_parameters")
    if isinstance(params, dict) and {"full_attention", "sliding_attention"} & set(params):
        return
    if params:
        r.read.add("rope_parameters")
        r.bad("rope_parameters", params, "OLMo-3 reads one mapping per layer type (full_attention, sliding_attention)")
        return
    theta = r.d.get("rope_theta") or theta
    full = {"rope_type": "default", **(r.d.get("rope_scaling") or {}), "rope_theta": theta}
    if r.d.get("rope_scaling"):
        r.moved["rope_parameters.full_attention"] = "rope_scaling"
    r.d = {**{k: v for k, v in r.d.items() if k not in ("rope_scaling", "rope_theta")},
           "rope_parameters": {"full_attention": full, "sliding_attention": {"rope_type": "default", "rope_theta": theta}}}


def _olmo3(r: _Reader) -> dict[str, Any]:
    _per_type_rope(r, DEFAULTS["olmo3"]["rope_theta"])
    base = _olmo2(r)
    n = base["n_layers"]
    default = ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(n)]
    base.update(_layer_windows(r, n, r.nullable("sliding_window"), default))
    if base.get("rope_local_base") == base["rope_base"] and base.get("rope_scaling", "none") == "none":
        base["rope_local_base"] = None   # both layer types rotate alike
    if base["attn_window"] is None:
        base["rope_local_base"] = None   # no sliding layer reads it
    return base


def _seed_oss(r: _Reader) -> dict[str, Any]:
    base = _decoder(r, dropout_read=True)
    dropout = _same_dropout(r, ("attention_dropout", "residual_dropout"))
    qkv, out, mlp = r("attention_bias"), r("attention_out_bias"), r("mlp_bias")
    if out != mlp or (out and not qkv):
        r.bad("attention_out_bias", out, f"with attention_bias={qkv}, mlp_bias={mlp}: our `bias` covers o and the "
                                         f"MLP alike, and qkv_bias q, k and v")
    return dict(base, ffn=r.act("hidden_act", GATED_ACTS), bias=bool(out), qkv_bias=bool(qkv and not out),
                dropout=dropout, embed_dropout=False)


def _exaone4(r: _Reader) -> dict[str, Any]:
    base = _decoder(r)
    n, window = base["n_layers"], r.nullable("sliding_window")
    pattern = r.nullable("sliding_window_pattern")
    types = r.nullable("layer_types")
    if window is None:   # every layer full and rotating; transformers expands no pattern then (it divides by 0)
        if types is None:
            r.bad("sliding_window", None, "without a window transformers needs layer_types")
        r.read.add("layer_types")
        fields: dict[str, Any] = dict(attn_window=None, global_every=None, nope_layers=None)
    else:
        if types is None and not (isinstance(pattern, int) and pattern > 0):
            r.bad("sliding_window_pattern", pattern, "without layer_types transformers expands only a positive "
                                                     "integer pattern")
            pattern = 4
        default = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)] if types is None \
            else types
        fields = _layer_windows(r, n, window, default)
        full = [i + 1 for i, t in enumerate(types or default) if t != "sliding_attention"]
        fields["nope_layers"] = tuple(full) or None   # with windows only the sliding layers rotate
    return dict(base, **fields, ffn=r.act("hidden_act", GATED_ACTS), bias=False, norm_placement="post_branch",
                qk_norm=True)


def _ernie4_5(r: _Reader) -> dict[str, Any]:
    """RoPE on pairs (2i, 2i+1): the weights are permuted to our rotate-half order on import."""
    return dict(_decoder(r), ffn=r.act("hidden_act", GATED_ACTS), bias=bool(r("use_bias")))


def _ministral3(r: _Reader) -> dict[str, Any]:
    if not r.d.get("rope_parameters") and not r.d.get("rope_scaling"):
        r.d = {**r.d, "rope_parameters": dict(_MINISTRAL3_ROPE)}
    source = "rope_scaling" if r.d.get("rope_scaling") else "rope_parameters"
    params = dict(r.d[source])
    beta = params.pop("llama_4_scaling_beta", None)
    if "max_position_embeddings" in params:
        params.pop("max_position_embeddings")
        r.ignore(f"{source}.max_position_embeddings", "YaRN reads the top-level max_position_embeddings")
    r.d = {**r.d, source: params}
    base = _mistral(r)
    original = params.get("original_max_position_embeddings")
    if beta is None or original is None:
        key = "llama_4_scaling_beta" if beta is None else "original_max_position_embeddings"
        r.bad(f"{source}.{key}", None, "Ministral 3 scales every query by 1 + beta*ln(1 + floor(p / original "
                                       "context)); transformers needs both")
        return base
    if not beta:
        return base
    return dict(base, attn_temperature=float(beta), attn_temperature_floor=int(original))


def strip_mrope(r: _Reader) -> None:
    """Qwen3-VL's M-RoPE keys: with text alone the temporal, height and width positions are one and the same, so
    the sections interleave identical rotations: plain RoPE."""
    source = "rope_scaling" if r.d.get("rope_scaling") else "rope_parameters"
    params = r.d.get(source)
    if not isinstance(params, dict):
        return
    for key in ("mrope_section", "mrope_interleaved"):
        if key in params:
            r.ignore(f"{source}.{key}", "M-RoPE: with text alone its three position streams are equal, so it is "
                                        "plain RoPE")
    r.d = {**r.d, source: {k: v for k, v in params.items() if k not in ("mrope_section", "mrope_interleaved")}}


def _qwen3_vl_text(r: _Reader) -> dict[str, Any]:
    strip_mrope(r)
    base = _decoder(r)
    r.expect("attention_bias", (False,), "Qwen3 puts it on q, k, v and o but not the MLP")
    return dict(base, ffn=r.act("hidden_act", GATED_ACTS), bias=False, qk_norm=True)


READERS = {"smollm3": _smollm3, "olmo3": _olmo3, "seed_oss": _seed_oss, "exaone4": _exaone4, "ernie4_5": _ernie4_5,
           "ministral3": _ministral3, "qwen3_vl_text": _qwen3_vl_text}
