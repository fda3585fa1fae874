"""The families added for real configs of today (issue #13): a tiny randomly initialised transformers model with
every parameter redrawn, converted with our importer and weight mapping, gives the same fp32 logits (1e-5);
the round trip HF -> ours -> HF gives the same state dict; every module pair names a transformers tensor; and
our closed-form count equals transformers' count."""
import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.params import count_params  # noqa: E402
from engine.interop.weights import ours_to_hf, pairs_for  # noqa: E402
from tests.hf_checks import (assert_both_attention_paths_match, assert_same_weights, convert_cases,  # noqa: E402
                           pairs_missing_from)
from engine.layers.position import alibi_slopes  # noqa: E402

transformers.logging.set_verbosity_error()
V, T = 97, 16
_IDS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)
_LLAMA = dict(vocab_size=V, hidden_size=64, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, **_IDS)

# name -> (model_type, HF config)
CASES = {
    # ALiBi with 4 heads, embedding LayerNorm, fused [heads, 3, hd] qkv, tied head
    "bloom": ("bloom", dict(vocab_size=V, hidden_size=32, n_layer=2, n_head=4, **_IDS)),
    # 6 heads: not a power of two, so the slopes take every other one of 8 heads' for the last two
    "bloom_6_heads": ("bloom", dict(vocab_size=V, hidden_size=48, n_layer=2, n_head=6, **_IDS)),
    # LayerNorm with bias, rotary on 25% of the head, biases on q/k/v only, GQA, untied
    "stablelm": ("stablelm", dict(_LLAMA, use_qkv_bias=True)),
    # StableLM's parallel residual with one shared norm
    "stablelm_parallel": ("stablelm", dict(_LLAMA, use_parallel_residual=True)),
    # Gemma-3: window 5 on layers 1, 2, 4 (layer_types, not every k-th), local RoPE base 100 vs global 10^6 with
    # linear scaling, (1 + w) QK-norm, sandwich norms, query_pre_attn_scalar 24 (not head_dim 16)
    "gemma3_text": ("gemma3_text", dict(_LLAMA, num_hidden_layers=4, head_dim=16, query_pre_attn_scalar=24,
                                        sliding_window=5, layer_types=["sliding_attention", "sliding_attention",
                                                                       "full_attention", "sliding_attention"],
                                        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0,
                                                                            "rope_theta": 1e6},
                                                         "sliding_attention": {"rope_type": "default",
                                                                               "rope_theta": 100.0}})),
    # Gemma-2 with query_pre_attn_scalar other than head_dim (Gemma-2-27B: 144 with head_dim 128)
    "gemma2_scalar": ("gemma2", dict(_LLAMA, head_dim=16, query_pre_attn_scalar=9, sliding_window=5)),
    # Phi-3.5 style: fused qkv_proj and gate_up_proj, LongRoPE (16 tokens pass the original context of 8: the long
    # factors and the attention factor apply), window 5 in every layer
    "phi3": ("phi3", dict(_LLAMA, sliding_window=5, original_max_position_embeddings=8,
                          rope_scaling={"type": "longrope", "short_factor": [1.0 + 0.2 * i for i in range(8)],
                                        "long_factor": [2.0 + i for i in range(8)]})),
    # Phi-4-mini style: partial rotary 0.75 (with LongRoPE over 6 frequencies), tied head, GQA
    "phi3_partial": ("phi3", dict(_LLAMA, partial_rotary_factor=0.75, tie_word_embeddings=True,
                                  original_max_position_embeddings=8,
                                  rope_scaling={"type": "longrope", "short_factor": [1.5] * 6,
                                                "long_factor": [3.0 + i for i in range(6)]})),
    # GPTBigCode (StarCoder 1): GPT-2 on nn.Linear layers, multi-query fused c_attn [q | k | v], learned positions
    "gpt_bigcode": ("gpt_bigcode", dict(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0,
                                        embd_pdrop=0.0, attn_pdrop=0.0, **_IDS)),
    # ... and with multi_query off: c_attn per head [heads, 3, head_dim]
    "gpt_bigcode_mha": ("gpt_bigcode", dict(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                            multi_query=False, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                            **_IDS)),
    # Phi-2 style: parallel block under one LayerNorm, rotary on half the head, biases incl. the output head
    "phi": ("phi", dict(_LLAMA, num_key_value_heads=None)),
    # ... with GQA, rotary on 40% of the head, a tied embedding (the head bias stays its own)
    "phi_tied": ("phi", dict(_LLAMA, partial_rotary_factor=0.4, tie_word_embeddings=True)),
    # OLMo-2: norms on the branch outputs only, QK RMSNorm over the whole projection (GQA: k over 2 heads)
    "olmo2": ("olmo2", _LLAMA),
    # ... with head_dim 8 (not hidden // heads): the QK norms are 32 and 16 wide
    "olmo2_head_dim": ("olmo2", dict(_LLAMA, head_dim=8)),
    # Cohere: parallel block under one bias-free LayerNorm, RoPE on pairs (2i, 2i+1), logits scaled by 0.0625, tied
    "cohere": ("cohere", _LLAMA),
    # ... with another logit scale, untied
    "cohere_untied": ("cohere", dict(_LLAMA, logit_scale=0.5, tie_word_embeddings=False)),
    # MPT: ALiBi (8 heads), fused Wqkv, no biases, bias-free LayerNorms, exact-GELU 4x MLP, tied
    "mpt": ("mpt", dict(vocab_size=V, d_model=64, n_heads=8, n_layers=2, max_seq_len=64, **_IDS)),
    # ... with a softmax scale other than 1/sqrt(head_dim), untied
    "mpt_scale": ("mpt", dict(vocab_size=V, d_model=64, n_heads=4, n_layers=2, max_seq_len=64,
                              tie_word_embeddings=False, attn_config={"softmax_scale": 0.1}, **_IDS)),
    # biases everywhere, dense tanh-GELU MLP (c_fc / c_proj), window 5 in every layer, tied
    "starcoder2": ("starcoder2", dict(_LLAMA, sliding_window=5)),
}


@pytest.fixture(scope="module")
def converted():
    return convert_cases(CASES, V, T)


@pytest.mark.parametrize("name", CASES)
def test_logits_match_transformers(converted, name):
    hf, ours, idx = converted[name]
    with torch.no_grad():
        ref = hf(input_ids=idx).logits
    assert_both_attention_paths_match(ours, idx, ref)


@pytest.mark.parametrize("name", CASES)
def test_round_trip_gives_identical_state_dict(converted, name):
    """ours_to_hf inverts the import for these families too (they have no config exporter yet)."""
    hf, ours, _ = converted[name]
    ref, got = hf.state_dict(), ours_to_hf(ours.cfg, CASES[name][0], ours.state_dict())
    assert_same_weights(ref, got, CASES[name][0])


@pytest.mark.parametrize("name", CASES)
def test_every_pair_names_a_transformers_tensor(converted, name):
    """The mapping lists no module transformers lacks (such a pair would be skipped silently on both ways)."""
    hf, ours, _ = converted[name]
    assert pairs_missing_from(hf, pairs_for(ours.cfg, CASES[name][0])) == []


@pytest.mark.parametrize("name", CASES)
def test_counts_equal_transformers(converted, name):
    hf, ours, _ = converted[name]
    assert count_params(ours.cfg).total == sum(p.numel() for p in hf.parameters())


def test_alibi_slopes():
    """Press et al.: 2^(-8h/n) for n a power of two; otherwise the power-of-two set, then the odd-numbered
    slopes of twice as many heads. Held against the paper's rule by hand and against transformers' BLOOM."""
    assert alibi_slopes(8).tolist() == [2.0 ** -h for h in range(1, 9)]
    assert alibi_slopes(6).tolist() == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    for n in (1, 3, 5, 12, 16, 20, 112):
        ref = build_alibi_tensor(torch.ones(1, 2), n, torch.float32)[:, 0, 1]   # slope * position 1
        torch.testing.assert_close(alibi_slopes(n), ref, rtol=1e-6, atol=0)   # they raise in fp32


def test_alibi_decoding_with_a_cache_matches_the_full_forward(converted):
    from engine.model import KVCache
    _, ours, idx = converted["bloom_6_heads"]
    cache = KVCache(ours.cfg.n_layers)
    with torch.no_grad():
        steps = torch.cat([ours(idx[:, t:t + 1], cache) for t in range(T)], dim=1)
        torch.testing.assert_close(steps, ours(idx), rtol=1e-5, atol=1e-5)
