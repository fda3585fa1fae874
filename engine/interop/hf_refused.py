"""Families of 2025-26 configs that transformers 5.24 builds and we cannot build exactly yet: each is refused
naming the config key that needs the missing piece and why, instead of a bare "unknown model_type". A reader
registered for the family (hf_config's readers are asked first) replaces its entry here.
"""
from __future__ import annotations

_HYBRID = "mixers other than softmax attention (hybrid layers) are not built yet"

# model_type -> (the key that needs it, the reason)
REFUSED: dict[str, tuple[str, str]] = {
    "lfm2": ("layer_types", f"its conv layers are LFM2's gated short convolutions: {_HYBRID}"),
    "lfm2_moe": ("layer_types", f"its conv layers are LFM2's gated short convolutions: {_HYBRID}"),
    "gemma4_text": ("attention_k_eq_v", "Gemma 4 attention is not modelled: values RMS-normalized without a gain "
                                         "(v_norm), unscaled scores, global layers with their own head width and "
                                         "key/value heads (global_head_dim), key/value sharing across layers "
                                         "(num_kv_shared_layers) and per-layer input embeddings"),
    "apertus": ("hidden_act", "xIELU, an activation with two learned scalars per layer (alpha_p, alpha_n), is not "
                              "built"),
    "hunyuan_v1_moe": ("model_type", "HunYuan normalizes q and k after RoPE with learned gains (query_layernorm, "
                                     "key_layernorm) and extends RoPE by an NTK alpha; neither is modelled"),
    "mimo_v2_flash": ("v_head_dim", "values narrower than keys (v_head_dim vs head_dim), and sliding layers with "
                                    "twice the key/value heads and attention sinks of their own: one attention "
                                    "geometry for every layer is all we build"),
}


def refusal(family: str) -> str:
    key, why = REFUSED[family]
    return f"{key}: {family} is not expressible ({why})"
