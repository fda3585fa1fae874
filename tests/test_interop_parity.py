"""Hugging Face parity: for each family, a tiny randomly initialised transformers model (every parameter
re-drawn so each one matters), converted with our own converter, gives the same logits; the round trip
HF -> ours -> HF gives the same state dict; our closed-form count equals HF's.

CPU, fp32, 2 x 16 tokens: longer than every sliding window used (5 and 6), so window edges are exercised.
"""
import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.params import count_params  # noqa: E402
from tests.hf_checks import assert_logits_match, assert_same_weights, convert_cases  # noqa: E402
from engine.interop import to_hf_config, to_transformers  # noqa: E402
from engine.model import build_model  # noqa: E402

transformers.logging.set_verbosity_error()
V, T = 97, 16
_IDS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None, max_position_embeddings=64)
_LLAMA = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, **_IDS)


def _rope(theta=10000.0, **kw):
    return {"rope_type": "default", "rope_theta": theta, **kw}


# family -> (model_type, HF config, per-test tolerance for torch.testing.assert_close (rtol = atol))
CASES = {
    # GQA, head_dim 16 != 32/4, biases on attention and MLP, untied, theta 500
    "llama": ("llama", dict(_LLAMA, head_dim=16, attention_bias=True, mlp_bias=True, rope_parameters=_rope(500.0)),
              1e-5),
    # sliding window 5 in every layer
    "mistral": ("mistral", dict(_LLAMA, sliding_window=5), 1e-5),
    # biases on q, k, v only; tied head
    "qwen2": ("qwen2", dict(_LLAMA, tie_word_embeddings=True), 1e-5),
    # per-head QK-norm; window 6 on layers 1 and 3, full attention on 2 and 4
    "qwen3": ("qwen3", dict(_LLAMA, num_hidden_layers=4, head_dim=16, use_sliding_window=True, sliding_window=6,
                            layer_types=["sliding_attention", "full_attention"] * 2), 1e-5),
    # (1 + w) RMSNorm, sqrt(d) embedding scale, MQA with head_dim 16, tanh-GeGLU, tied
    "gemma": ("gemma", dict(_LLAMA, num_key_value_heads=1, head_dim=16), 1e-5),
    # sandwich norms, local (window 5) / global alternation, attention and final soft-caps that bite
    "gemma2": ("gemma2", dict(_LLAMA, num_hidden_layers=4, head_dim=16, query_pre_attn_scalar=16, sliding_window=5,
                              attn_logit_softcapping=2.0, final_logit_softcapping=10.0), 1e-5),
    # Conv1D layout, fused c_attn, tanh GELU ("gelu_new"), learned positions, tied
    "gpt2": ("gpt2", dict(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0,
                          embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None, eos_token_id=None), 1e-5),
    # parallel residual with two norms, fused [heads, 3, hd] qkv, rotary on 25% of each head
    "gpt_neox": ("gpt_neox", dict(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                  num_attention_heads=4, rope_parameters=_rope(partial_rotary_factor=0.25), **_IDS),
                 1e-5),
    # the serial NeoX block (use_parallel_residual=False)
    "gpt_neox_serial": ("gpt_neox", dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                         num_attention_heads=4, use_parallel_residual=False, **_IDS), 1e-5),
    # Falcon-7B style: parallel block, one shared norm, multi-query, no biases, tied
    "falcon": ("falcon", dict(vocab_size=V, hidden_size=32, ffn_hidden_size=48, num_hidden_layers=2,
                              num_attention_heads=4, **_IDS), 1e-5),
    # Falcon-40B style: new_decoder_architecture, GQA-2 with grouped fused qkv, two norms, biases
    "falcon_new": ("falcon", dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  num_kv_heads=2, new_decoder_architecture=True, bias=True, **_IDS), 1e-5),
    # the classic serial Falcon block (parallel_attn=False): multi-query, input and post-attention norms
    "falcon_serial": ("falcon", dict(vocab_size=V, hidden_size=32, ffn_hidden_size=48, num_hidden_layers=2,
                                     num_attention_heads=4, parallel_attn=False, **_IDS), 1e-5),
}


@pytest.fixture(scope="module")
def converted():
    """name -> (HF model, our model, token ids): each built once for all tests of this module."""
    return convert_cases(CASES, V, T)


@pytest.mark.parametrize("name", CASES)
def test_logits_match_transformers(converted, name):
    assert_logits_match(converted[name], CASES[name][2])


@pytest.mark.parametrize("name", CASES)
def test_round_trip_gives_identical_state_dict(converted, name):
    hf, ours, _ = converted[name]
    back = to_transformers(ours, attn_implementation="eager")
    assert type(back) is type(hf)
    ref, got = hf.state_dict(), back.state_dict()
    assert_same_weights(ref, got, CASES[name][0])
    assert to_hf_config(ours.cfg)[0] == CASES[name][0]


@pytest.mark.parametrize("name", CASES)
def test_counts_equal_transformers(converted, name):
    hf, ours, _ = converted[name]
    assert count_params(ours.cfg).total == sum(p.numel() for p in hf.parameters())
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf.parameters())


@pytest.mark.parametrize("name", ["qwen2", "gemma", "gemma2", "gpt2", "falcon"])
def test_tied_head_stays_one_parameter(converted, name):
    _, ours, _ = converted[name]
    assert ours.cfg.tie_embeddings and ours.head.weight is ours.tok_emb.weight


def _without(ours, **changes):
    """Our model with some knob switched off, same weights: proves the knob matters at this size."""
    other = build_model(ours.cfg.replace(**changes))
    other.load_state_dict(ours.state_dict())
    return other.eval()


@pytest.mark.parametrize("name,changes", [
    ("mistral", dict(attn_window=None)),
    ("qwen3", dict(attn_window=None)),
    ("gemma2", dict(attn_window=None)),
    ("gemma2", dict(attn_softcap=None)),
    ("gemma2", dict(logit_softcap=None)),
    ("gemma", dict(embed_scale=False)),
    ("gpt_neox", dict(rope_fraction=1.0)),
])
def test_each_semantic_knob_matters(converted, name, changes):
    hf, ours, idx = converted[name]
    with torch.no_grad():
        gap = (_without(ours, **changes)(idx) - hf(input_ids=idx).logits).abs().max().item()
    assert gap > 1e-2, f"{name} with {changes}: the parity test would not notice this knob"


@pytest.mark.parametrize("name", ["llama", "mistral", "falcon_new"])
def test_explicit_attention_path_matches_too(converted, name):
    """Parity above runs our SDPA path (except soft-capped Gemma-2); the explicit softmax path agrees too."""
    hf, ours, idx = converted[name]
    ours.set_attention("explicit")
    try:
        with torch.no_grad():
            torch.testing.assert_close(ours(idx), hf(input_ids=idx).logits, rtol=1e-5, atol=1e-5)
    finally:
        ours.set_attention("sdpa")
