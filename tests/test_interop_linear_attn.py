"""Hugging Face parity for Kimi Linear (KDA beside NoPE MLA, DeepSeek-V3 MoE) and MiniMax-01 (lightning beside
softmax attention, post-norm with DeepNorm's residual alpha, Mixtral MoE): shrunk transformers models with every
weight redrawn, converted with our converter, give the same logits within 1e-4 (fp32, CPU); the round trip gives
the same state dict and config, where the writer can express the model."""
import pytest

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.config import ConfigError  # noqa: E402
from engine.interop import from_hf_config, to_hf_config  # noqa: E402
from tests.hf_checks import assert_logits_match, assert_round_trip, convert_cases  # noqa: E402

transformers.logging.set_verbosity_error()
V, T = 97, 21
_KIMI = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=4,
             kv_lora_rank=8, q_lora_rank=None, qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=5,
             linear_attn_config=dict(num_heads=2, head_dim=8, short_conv_kernel_size=4, kda_layers=[1, 2, 4],
                                     full_attn_layers=[3]),
             model_max_length=64, bos_token_id=None, eos_token_id=None, pad_token_id=None)
_MINIMAX = dict(vocab_size=V, hidden_size=32, intermediate_size=24, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, block_size=8,
                max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None)
_DEEPNORM = {k: 2.0 for k in ("full_attn_alpha_factor", "linear_attn_alpha_factor", "mlp_alpha_factor")}
CASES = {
    # every layer dense (first_k_dense_replace covers them all), q through a plain projection
    "kimi_linear_dense": ("kimi_linear", dict(_KIMI, first_k_dense_replace=4)),
    # MoE after one dense layer, shared expert, q through its LoRA, groups
    "kimi_linear_moe": ("kimi_linear", dict(_KIMI, q_lora_rank=6, num_experts=8, num_experts_per_token=2,
                                            moe_intermediate_size=12, num_shared_experts=1, first_k_dense_replace=1,
                                            num_expert_group=2, topk_group=1, routed_scaling_factor=2.5)),
    # transformers' default alternation (full first), alpha 1, T longer than two lightning blocks
    "minimax": ("minimax", dict(_MINIMAX)),
    # the published 7:1 pattern in miniature and DeepNorm's alpha
    "minimax_deepnorm": ("minimax", dict(_MINIMAX, **_DEEPNORM, layer_types=[
        "linear_attention", "linear_attention", "linear_attention", "full_attention"])),
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


def test_each_family_refuses_what_it_cannot_express_by_name():
    """Export: a field the family's config.json has no key for is named; import: the remote code's keys (which
    transformers 5.24 does not read) and branch scales we cannot express are named."""
    kimi = from_hf_config({"model_type": "kimi_linear", **CASES["kimi_linear_moe"][1]})
    for change, field in ((dict(state_dtype="bf16"), "state_dtype"), (dict(position="rope"), "position"),
                          (dict(gdn_v_heads=4), "gdn_v_heads"), (dict(residual_alpha=2.0), "residual_alpha")):
        with pytest.raises(ConfigError) as e:
            to_hf_config(kimi.replace(**change), "kimi_linear")
        assert any(p.startswith(field) for p in e.value.problems), e.value.problems
    minimax = from_hf_config({"model_type": "minimax", **CASES["minimax_deepnorm"][1]})
    assert minimax.residual_alpha == 2.0 and minimax.layer_types == ("lightning",) * 3 + ("full",)
    for change, field in ((dict(embed_norm=False), "embed_norm"), (dict(n_shared_experts=1), "n_shared_experts"),
                          (dict(layer_types=("kda",) * 4), "layer_types")):
        with pytest.raises(ConfigError) as e:
            to_hf_config(minimax.replace(**change), "minimax")
        assert any(p.startswith(field) for p in e.value.problems), e.value.problems
    base = {"model_type": "minimax", **CASES["minimax"][1]}
    for change, key in (({"attn_type_list": [0, 1, 0, 1]}, "attn_type_list"),
                        ({"mlp_alpha_factor": 3.0}, "full_attn_alpha_factor"),
                        ({"mlp_beta_factor": 0.5}, "mlp_beta_factor")):
        with pytest.raises(ConfigError) as e:
            from_hf_config({**base, **change})
        assert any(p.startswith(key) for p in e.value.problems), e.value.problems


def test_the_preset_exports_as_kimi_linear_and_back():
    """kimi-linear-48b-a3b (tests/data/hf_configs/kimi-linear-48b-a3b.json imports to it exactly, test_hf_coverage)
    has one family that computes it, and its config.json reads back to the same model."""
    from engine.presets import PRESETS
    cfg = PRESETS["kimi-linear-48b-a3b"].config
    family, config = to_hf_config(cfg)
    assert family == "kimi_linear" and config["linear_attn_config"]["full_attn_layers"] == [4, 8, 12, 16, 20, 24, 27]
    assert from_hf_config({"model_type": family, **config}) == cfg.replace(name=family)


@pytest.mark.parametrize("pattern", ["alternating", "dense first"])
def test_kimi_mlp_layer_types_put_moe_exactly_where_the_file_says(pattern):
    """mlp_layer_types names each layer's FFN: a sparse entry is an MoE layer, a dense one a dense FFN, in any
    order (not only dense layers first)."""
    import json
    from pathlib import Path
    d = json.loads((Path(__file__).parent / "data" / "hf_configs" / "kimi-linear-48b-a3b.json").read_text())
    n = d["num_hidden_layers"]
    d["mlp_layer_types"] = [("sparse" if i % 2 else "dense") if pattern == "alternating" else
                            ("dense" if i < 3 else "sparse") for i in range(n)]
    cfg = from_hf_config(d)
    assert [cfg.layer_ffn(i) for i in range(n)] == ["moe" if k == "sparse" else "dense" for k in d["mlp_layer_types"]]

