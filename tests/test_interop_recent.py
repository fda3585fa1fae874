"""The 2025-26 families (issue #24): a tiny randomly initialised transformers model with every weight redrawn
(DeepSeek-style selection biases too) converted with our importer and weight mapping gives the same fp32 logits
(1e-4 on logits of size up to ~10) over 16 tokens (past the windows, chunks and temperature steps of these configs); the state dict round
trips; our count equals transformers'; and the exported config.json builds a transformers model that computes
the same logits with our weights. Multimodal files (Gemma 3, Llama 4, Mistral 3, Qwen3-VL, Qwen3-VL-MoE) are
held through their language model."""
import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.params import count_params  # noqa: E402
from engine.interop import to_hf_config, to_transformers  # noqa: E402
from engine.interop.hf_wrappers import WRAPPERS, language_state  # noqa: E402
from engine.interop.weights import ours_to_hf, pairs_for  # noqa: E402
from tests.hf_checks import (assert_both_attention_paths_match, assert_same_weights, convert_cases,  # noqa: E402
                           pairs_missing_from)

transformers.logging.set_verbosity_error()
V, T = 97, 16
_IDS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)
_LLAMA = dict(vocab_size=V, hidden_size=64, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=64, **_IDS)
_MOE = dict(_LLAMA, moe_intermediate_size=24, num_experts_per_tok=2)
_SIGLIP = dict(model_type="siglip_vision_model", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
               num_attention_heads=2, image_size=28, patch_size=14)
_QWEN_VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=64,
                    deepstack_visual_indexes=[0])
_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8, "beta_fast": 32.0,
         "beta_slow": 1.0}

# name -> (model_type, HF config, the family to_hf_config must choose, or None where no writer applies)
CASES = {
    # NoPE on layers 2 and 4 (every 2nd), tied head
    "smollm3": ("smollm3", dict(_LLAMA, no_rope_layer_interval=2), "smollm3"),
    # an explicit NoPE list and a window of 5 on the NoPE layers (SmolLM3's default layer_types with windows)
    "smollm3_window": ("smollm3", dict(_LLAMA, no_rope_layers=[1, 0, 1, 1], use_sliding_window=True, sliding_window=5),
                       None),
    # OLMo-2 placement and all-heads QK-norm, window 5 on layers 1-3, full layer 4
    "olmo3": ("olmo3", dict(_LLAMA, sliding_window=5), "olmo3"),
    # ... with YaRN on the full layers only (a legacy rope_scaling), the sliding layers plain at the same theta
    "olmo3_yarn": ("olmo3", dict(_LLAMA, sliding_window=5, rope_scaling=_YARN, rope_theta=100.0), "olmo3"),
    # ... each layer type at its own theta (rope_parameters per type, no scaling): the sliding layers' is not the
    # full layers'
    "olmo3_local_theta": ("olmo3", dict(_LLAMA, sliding_window=5, rope_parameters={
        "full_attention": {"rope_type": "default", "rope_theta": 1e4},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10.0}}), "olmo3"),
    # biases on q, k, v only, dropout 0.1 on attention weights and branch outputs (not the embeddings)
    "seed_oss": ("seed_oss", dict(_LLAMA), "seed_oss"),
    # ... with attention_out_bias and mlp_bias: biases everywhere
    "seed_oss_bias": ("seed_oss", dict(_LLAMA, attention_out_bias=True, mlp_bias=True), "seed_oss"),
    # post-branch norms, per-head QK-norm, local/global every 2nd layer, the global layers NoPE
    "exaone4": ("exaone4", dict(_LLAMA, sliding_window=5, sliding_window_pattern=2), "exaone4"),
    # ... without windows every layer rotates
    "exaone4_full": ("exaone4", dict(_LLAMA, sliding_window=None, layer_types=["full_attention"] * 4), "exaone4"),
    # RoPE on pairs (2i, 2i+1), biases everywhere, tied: with our rotate-half weights it is Llama
    "ernie4_5": ("ernie4_5", dict(_LLAMA, use_bias=True), "llama"),
    # YaRN and the query temperature 1 + 0.5 ln(1 + floor(p / 4)) on every layer
    "ministral3": ("ministral3", dict(_LLAMA, rope_parameters=dict(_YARN, rope_theta=1e4, original_max_position_embeddings=4,
                                                                   llama_4_scaling_beta=0.5, mscale=1.0,
                                                                   mscale_all_dim=1.0)), "ministral3"),
    # DeepSeek-V3's MoE (experts chosen in the best 2 of 4 groups, selection bias, shared expert, routed scale) on
    # GQA with q/k/v biases, half of each head rotating, QK-norm, one dense layer first
    "glm4_moe": ("glm4_moe", dict(_MOE, n_routed_experts=8, n_shared_experts=1, first_k_dense_replace=1, n_group=4,
                                  topk_group=2, routed_scaling_factor=2.5, use_qk_norm=True, attention_bias=True),
                 "glm4_moe"),
    # Qwen3 attention with windows 5 from layer 2 on (max_window_layers 1), DeepSeek-V3's MoE, 2 shared experts
    "dots1": ("dots1", dict(_MOE, n_routed_experts=4, n_shared_experts=2, first_k_dense_replace=1, sliding_window=5,
                            max_window_layers=1, norm_topk_prob=True), "dots1"),
    # softmax routing by probability + a frozen bias, renormalised, MoE from layer 2 every layer, one shared
    # expert, RoPE on pairs
    "ernie4_5_moe": ("ernie4_5_moe", dict(_LLAMA, moe_num_experts=4, moe_k=2, moe_intermediate_size=24,
                                          moe_num_shared_experts=1, moe_layer_start_index=1), "ernie4_5_moe"),
    # NoPE every 2nd layer (those full, the others chunked by 5), QK RMS-scaling on rotating layers, temperature
    # 0.5 every 4 positions on the NoPE layers, MoE every 2nd layer (top-1 sigmoid on the expert input + shared)
    "llama4_text": ("llama4_text", dict(_LLAMA, intermediate_size_mlp=40, intermediate_size=24, num_local_experts=4,
                                        interleave_moe_layer_step=2, no_rope_layer_interval=2, attention_chunk_size=5,
                                        floor_scale=4, attn_scale=0.5,   # Scout's llama3 scaling: a hard cut at L0
                                        rope_parameters={"rope_type": "llama3", "factor": 16.0, "rope_theta": 1e4,
                                                         "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                                                         "original_max_position_embeddings": 8}), "llama4_text"),
    # ... every layer MoE, two experts per token, llama3 scaling, no QK-norm
    "llama4_text_moe": ("llama4_text", dict(_LLAMA, intermediate_size_mlp=40, intermediate_size=24,
                                            num_local_experts=4, num_experts_per_tok=2, use_qk_norm=False,
                                            no_rope_layer_interval=3, attention_chunk_size=6,
                                            rope_parameters={"rope_type": "llama3", "factor": 8.0, "rope_theta": 1e4,
                                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                             "original_max_position_embeddings": 8}), "llama4_text"),
    # multimodal files: the language model is the text_config
    "gemma3": ("gemma3", dict(text_config=dict(_LLAMA, sliding_window=5, query_pre_attn_scalar=16),
                              vision_config=_SIGLIP, tie_word_embeddings=False), None),
    "mistral3": ("mistral3", dict(text_config=dict(_LLAMA, model_type="ministral3", rope_parameters=dict(
        _YARN, rope_theta=1e4, llama_4_scaling_beta=0.1)), vision_config=dict(
        model_type="pixtral", hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        head_dim=8, image_size=28, patch_size=14), spatial_merge_size=1), "ministral3"),
    "qwen3_vl": ("qwen3_vl", dict(text_config=dict(_LLAMA, rope_parameters={
        "rope_type": "default", "rope_theta": 1e4, "mrope_section": [3, 3, 2], "mrope_interleaved": True}),
        vision_config=_QWEN_VISION), None),
    "qwen3_vl_moe": ("qwen3_vl_moe", dict(text_config=dict(_MOE, num_experts=4, decoder_sparse_step=2, rope_parameters={
        "rope_type": "default", "rope_theta": 1e4, "mrope_section": [3, 3, 2], "mrope_interleaved": True}),
        vision_config=_QWEN_VISION, tie_word_embeddings=True), None),
    "llama4": ("llama4", dict(text_config=dict(_LLAMA, intermediate_size_mlp=40, intermediate_size=24,
                                               num_local_experts=2, attention_chunk_size=5, no_rope_layer_interval=2,
                                               floor_scale=4, attn_scale=0.5),
                              vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                                 num_attention_heads=2, image_size=28, patch_size=14,
                                                 vision_output_dim=32, projector_input_dim=32,
                                                 projector_output_dim=32)), "llama4_text"),
}


class _Scrambled(dict):
    """convert_cases, with the DeepSeek-style selection biases (zero buffers at init) redrawn too."""

    def __init__(self):
        super().__init__()
        self.inner = convert_cases(CASES, V, T)

    def __missing__(self, name):
        hf, _, idx = self.inner[name]
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for key, buf in hf.named_buffers():
                if key.endswith("e_score_correction_bias"):
                    buf.copy_(torch.randn(buf.shape, generator=g) * 0.3)
        from engine.interop import from_transformers
        self[name] = (hf, from_transformers(hf), idx)
        return self[name]


@pytest.fixture(scope="module")
def converted():
    return _Scrambled()


def _text_state(hf, name):
    model_type = hf.config.model_type
    state = hf.state_dict()
    return language_state(model_type, state) if model_type in WRAPPERS else state


def _text_family(ours, name):
    from engine.interop.hf_config import import_hf
    return import_hf({"model_type": CASES[name][0], **CASES[name][1]}).family


def _logits(hf, idx):
    # transformers 5.24's Llama4ForConditionalGeneration fails on text alone (it reads image outputs it never
    # made): its language model, the very module the text goes through, is asked instead
    if type(hf).__name__ == "Llama4ForConditionalGeneration":
        return hf.language_model(input_ids=idx).logits
    return hf(input_ids=idx).logits


@pytest.mark.parametrize("name", CASES)
def test_logits_match_transformers(converted, name):
    hf, ours, idx = converted[name]
    with torch.no_grad():
        ref = _logits(hf, idx)
    assert_both_attention_paths_match(ours, idx, ref, atol=1e-4)


@pytest.mark.parametrize("name", CASES)
def test_decoding_with_a_cache_matches_the_full_forward(converted, name):
    """Windows, chunks and the temperature at absolute positions hold token by token too."""
    from engine.model import KVCache
    _, ours, idx = converted[name]
    cache = KVCache(ours.cfg.n_layers)
    with torch.no_grad():
        steps = torch.cat([ours(idx[:, t:t + 1], cache) for t in range(T)], dim=1)
        torch.testing.assert_close(steps, ours(idx), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", CASES)
def test_round_trip_gives_identical_state_dict(converted, name):
    hf, ours, _ = converted[name]
    family = _text_family(ours, name)
    assert_same_weights(_text_state(hf, name), ours_to_hf(ours.cfg, family, ours.state_dict()), family)


@pytest.mark.parametrize("name", CASES)
def test_every_pair_names_a_transformers_tensor(converted, name):
    hf, ours, _ = converted[name]
    family = _text_family(ours, name)
    state = _text_state(hf, name)
    modules = set(state) | {k.rsplit(".", 1)[0] for k in state}
    assert [p.hf for p in pairs_for(ours.cfg, family) if p.hf not in modules] == []


@pytest.mark.parametrize("name", CASES)
def test_counts_equal_transformers(converted, name):
    """Every parameter of the language model (of a multimodal model: not the vision tower's)."""
    hf, ours, _ = converted[name]
    wrapper = WRAPPERS.get(hf.config.model_type)
    text = [p for k, p in hf.named_parameters() if wrapper is None or k.startswith((wrapper.prefix, wrapper.head))]
    assert count_params(ours.cfg).total == sum(p.numel() for p in text)


@pytest.mark.parametrize("name", [n for n in CASES if CASES[n][2]])
def test_export_builds_the_same_model(converted, name):
    """to_hf_config picks the family, and transformers built from that config.json with our weights computes
    our logits."""
    _, ours, idx = converted[name]
    family, config = to_hf_config(ours.cfg)
    assert family == CASES[name][2]
    back = to_transformers(ours, attn_implementation="eager").eval()
    with torch.no_grad():
        torch.testing.assert_close(back(input_ids=idx).logits, ours(idx), rtol=1e-5, atol=1e-4)
    from engine.interop import from_hf_config
    assert from_hf_config({"model_type": family, **config}) == ours.cfg.replace(name=family)


def test_pairs_cover_every_tensor_of_the_text_models(converted):
    for name in ("llama4_text", "glm4_moe", "ernie4_5_moe"):
        hf, ours, _ = converted[name]
        assert pairs_missing_from(hf, pairs_for(ours.cfg, name)) == []
