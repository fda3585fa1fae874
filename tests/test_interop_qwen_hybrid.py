"""Hugging Face parity for Qwen3-Next and Qwen3.5 (dense and MoE, text): shrunk transformers models with every
weight redrawn, converted with our converter, give the same logits within 1e-4 (fp32, CPU); the round trip gives
the same state dict and config; our KV and state closed forms equal the tensors of transformers' own cache."""
import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.memory import kv_cache_bytes, state_bytes  # noqa: E402
from engine.config import ConfigError, ModelConfig  # noqa: E402
from engine.interop import from_hf_config, hf_model_from_config, to_hf_config  # noqa: E402
from engine.runtime import DTYPE_BYTES, TORCH_DTYPES  # noqa: E402
from tests.hf_checks import assert_logits_match, assert_round_trip, convert_cases  # noqa: E402

transformers.logging.set_verbosity_error()
V, T = 97, 21
_BASE = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
             linear_key_head_dim=8, linear_value_head_dim=6, linear_conv_kernel_dim=4, max_position_embeddings=64,
             layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
             bos_token_id=None, eos_token_id=None, pad_token_id=None)
_EXPERTS = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=24)
CASES = {
    # MoE with a dense first layer (mlp_only_layers), a gated shared expert, the 3:1 default pattern of 8 layers
    "qwen3_next": ("qwen3_next", dict(_BASE, **_EXPERTS, mlp_only_layers=[0], num_hidden_layers=8,
                                      layer_types=None, full_attention_interval=4)),
    # every 2nd layer MoE, value heads = key heads, a 2-tap conv
    "qwen3_next_sparse": ("qwen3_next", dict(_BASE, **_EXPERTS, decoder_sparse_step=2, linear_num_value_heads=2,
                                             linear_conv_kernel_dim=2, norm_topk_prob=False)),
    # dense Qwen3.5 with its multimodal RoPE sections (plain RoPE for text)
    "qwen3_5_text": ("qwen3_5_text", dict(_BASE, rope_parameters=dict(
        rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25, mrope_section=[1, 1, 0],
        mrope_interleaved=True))),
    "qwen3_5_moe_text": ("qwen3_5_moe_text", dict({k: v for k, v in _BASE.items() if k != "intermediate_size"},
                                                  **_EXPERTS)),
}


@pytest.fixture(scope="module")
def converted():
    return convert_cases(CASES, V, T)


@pytest.mark.parametrize("name", CASES)
def test_logits_match_transformers(converted, name):
    assert_logits_match(converted[name], 1e-4)


@pytest.mark.parametrize("name", CASES)
def test_round_trip_gives_the_same_weights_and_config(converted, name):
    hf, ours, _ = converted[name]
    assert_round_trip(hf, ours, CASES[name][0])


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", ["qwen3_next_sparse", "qwen3_5_text"])
def test_closed_forms_equal_transformers_cache_tensors(name, dtype):
    """A forward with use_cache: the attention layers' keys and values, and the Gated DeltaNet layers' conv and
    recurrent states, as transformers' DynamicCache holds them (K conv positions; the state in fp32)."""
    model_type, config = CASES[name]
    hf = hf_model_from_config(model_type, config).eval().to(TORCH_DTYPES[dtype])
    cfg = from_hf_config({"model_type": model_type, **config})
    B = 3
    with torch.no_grad():
        cache = hf(input_ids=torch.randint(0, V, (B, 11)), use_cache=True).past_key_values
    kv = conv = recurrent = 0
    for layer in cache.layers:
        if hasattr(layer, "conv_states"):
            conv += sum(t.numel() * t.element_size() for t in layer.conv_states.values())
            recurrent += sum(t.numel() * t.element_size() for t in layer.recurrent_states.values())
        else:
            kv += layer.keys.numel() * layer.keys.element_size() + layer.values.numel() * layer.values.element_size()
    assert kv == kv_cache_bytes(cfg, B, 11, dtype) > 0
    assert state_bytes(cfg, B, dtype, "transformers") == {"conv": conv, "recurrent": recurrent}
    d, e = cfg.gdn_conv_kernel, DTYPE_BYTES[dtype]
    assert conv == 2 * B * (2 * 2 * 8 + cfg.gdn_v_heads * 6) * d * e      # 2 Gated DeltaNet layers, K positions


def test_every_family_refuses_what_it_cannot_express():
    cfg = from_hf_config({"model_type": "qwen3_5_text", **CASES["qwen3_5_text"][1]})
    with pytest.raises(ConfigError) as e:
        to_hf_config(cfg, "llama")
    assert any(p.startswith("layer_types:") for p in e.value.problems)
    assert any(p.startswith("attn_gate:") for p in e.value.problems)
    for change, field in ((dict(layer_types=("gdn", "none", "gdn", "full"), ffn_types=("dense",) * 4), "layer_types"),
                          (dict(attn_gate="head"), "attn_gate"), (dict(state_dtype="bf16"), "state_dtype")):
        with pytest.raises(ConfigError) as e:
            to_hf_config(cfg.replace(**change), "qwen3_next")
        assert any(p.startswith(field) for p in e.value.problems), e.value.problems


def test_published_style_keys_are_read_or_listed():
    """Qwen3.5 configs say attn_output_gate and mamba_ssm_dtype: the state dtype follows the latter; a config
    without the gate is refused (transformers always gates); the multimodal wrapper imports its text model."""
    text = {"model_type": "qwen3_5_text", **CASES["qwen3_5_text"][1], "attn_output_gate": True,
            "mamba_ssm_dtype": "float32"}
    assert from_hf_config(text).state_dtype == "fp32"
    with pytest.raises(ConfigError, match="attn_output_gate"):
        from_hf_config({**text, "attn_output_gate": False})
    wrapped = {"model_type": "qwen3_5", "text_config": {k: v for k, v in text.items() if k != "model_type"},
               "vision_config": {"depth": 2}, "image_token_id": 5}
    assert from_hf_config(wrapped) == from_hf_config(text)   # named by its text model's family, as every wrapper
    assert isinstance(from_hf_config({"model_type": "qwen3_next"}), ModelConfig)


def test_qwen3_5_moe_reads_no_dense_width_from_a_stray_intermediate_size():
    """Qwen3.5-MoE has no intermediate_size (every layer is MoE; transformers' text config has no such field
    and builds the same model with or without it): a file carrying one imports as the same config, and exports
    the same config.json, as the file without it."""
    model_type, config = CASES["qwen3_5_moe_text"]
    plain = from_hf_config({"model_type": model_type, **config})
    stray = from_hf_config({"model_type": model_type, **config, "intermediate_size": 999})
    assert stray == plain and to_hf_config(stray) == to_hf_config(plain)
