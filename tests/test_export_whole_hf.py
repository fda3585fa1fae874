"""Our config.json as transformers reads it (tests/test_export_whole.py's cases): its config class holds every
value we write under the key we write it (a misspelt or misplaced key would be dropped or defaulted silently), and
where the layout matters, the class places MoE layers, RoPE-less layers, chunked, sliding and lightning layers where
our config does."""
from __future__ import annotations

import pytest

from tests.export_whole_cases import CASES, written

transformers = pytest.importorskip("transformers")

# (family, key): what transformers makes of the value we write, and why it is the same model
READ_OTHERWISE = {
    ("granitemoehybrid", "layer_types"): "renamed: mamba -> linear_attention, attention -> full_attention",
    ("nemotron_h", "layers_block_type"): "renamed into layer_types: mamba -> linear_attention (mlp, moe kept)",
    ("glm4_moe", "partial_rotary_factor"): "moved into rope_parameters, where we write it as well",
    ("ernie4_5_moe", "moe_layer_end_index"): "-1 is read as the last layer's index",
    ("exaone4", "sliding_window_pattern"): "without a window transformers keeps no pattern (0)",
}


def _read(family: str, out: dict):
    return transformers.AutoConfig.for_model(family, **out)


@pytest.mark.parametrize("name", CASES)
def test_transformers_holds_every_value_we_write(name):
    family = CASES[name][0]
    out = written(name)[1]
    hf = _read(family, out)
    held = {k: getattr(hf, k, "<not held>") for k in out}
    held = {k: list(v) if isinstance(v, tuple) else v for k, v in held.items()}
    differ = {k: (out[k], held[k]) for k in out if held[k] != out[k] and (family, k) not in READ_OTHERWISE}
    assert differ == {}


@pytest.mark.parametrize("name", [n for n, (family, _, _) in CASES.items() if family == "llama4_text"])
def test_llama4_layers_are_laid_out_as_ours(name):
    cfg, out = written(name)
    hf = transformers.Llama4TextConfig(**out)
    assert hf.moe_layers == [i for i, moe in enumerate(cfg.moe_layers) if moe]
    assert [i + 1 for i, rotates in enumerate(hf.no_rope_layers) if not rotates] == list(cfg.nope_layers or ())
    chunked = [t == "chunked" for t in (cfg.layer_types or ("full",) * cfg.n_layers)]
    assert [t == "chunked_attention" for t in hf.layer_types] == chunked


@pytest.mark.parametrize("name", [n for n, (family, _, _) in CASES.items() if family == "minimax"])
def test_minimax_layers_are_laid_out_as_ours(name):
    cfg, out = written(name)
    hf = transformers.MiniMaxConfig(**out)
    assert [t == "linear_attention" for t in hf.layer_types] == ["lightning" in s.mixers for s in cfg.layer_specs]
    assert hf.sliding_window == cfg.attn_window
    assert [getattr(hf, k) for k in ("full_attn_beta_factor", "linear_attn_beta_factor", "mlp_beta_factor")] == [1] * 3


@pytest.mark.parametrize("name", [n for n, (family, _, _) in CASES.items() if family == "falcon"])
def test_falcon_has_our_key_value_heads(name):
    cfg, out = written(name)
    hf = transformers.FalconConfig(**out)
    # FalconAttention's rule: one key/value head for a classic multi-query model, else num_kv_heads
    kv = hf.num_kv_heads if hf.new_decoder_architecture or not hf.multi_query else 1
    assert kv == cfg.kv_heads
    assert hf.alibi is False and hf.parallel_attn == (cfg.block == "parallel")
