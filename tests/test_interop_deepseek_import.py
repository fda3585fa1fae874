"""Reading a DeepSeek config.json (hf_deepseek.py): each value MLA or DeepSeek's MoE cannot express is one exact
problem naming the HF key, its value and why; the derived keys transformers recomputes are accepted when they
agree and listed as ignored when stale (transformers overwrites them); an rms_norm_eps other than the latent
norms' fixed 1e-6 is read with mla_norm_eps. Pure stdlib: no transformers needed."""
import pytest

from engine.config import ConfigError
from engine.interop import from_hf_config
from engine.interop.hf_config import import_hf_config

# the tiny MLA + MoE sizes of tests/test_mla.py: qk_head_dim = 10 + 6, layer 0 dense, 8 experts in 4 groups
_HF = dict(vocab_size=97, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=2,
           num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=12, qk_rope_head_dim=6, qk_nope_head_dim=10,
           v_head_dim=8, q_lora_rank=20, n_routed_experts=8, n_group=4, topk_group=2, num_experts_per_tok=2,
           first_k_dense_replace=1, max_position_embeddings=64)


def _problems(family: str, **changes) -> list[str]:
    with pytest.raises(ConfigError) as e:
        from_hf_config({"model_type": family, **_HF, **changes})
    return e.value.problems


def _refused(key: str, value: str, why: str) -> str:
    return f"{key}: {value} is not expressible ({why})"


@pytest.mark.parametrize("family", ["deepseek_v2", "deepseek_v3"])
@pytest.mark.parametrize("changes,problem", [
    (dict(num_key_value_heads=2), _refused("num_key_value_heads", "2", "MLA rebuilds keys and values for every head")),
    (dict(attention_bias=True),
     _refused("attention_bias", "True", "our `bias` would put biases on the MLP too")),
    (dict(moe_layer_freq=2),
     _refused("moe_layer_freq", "2", "transformers makes every layer after the dense ones MoE")),
])
def test_each_inexpressible_mla_value_is_one_exact_problem(family, changes, problem):
    assert _problems(family, **changes) == [problem]


@pytest.mark.parametrize("changes,problem", [
    (dict(topk_method="greedy"),
     _refused("topk_method", "'greedy'", "DeepSeek-V3 selects with the bias-corrected sigmoid scores")),
    (dict(scoring_func="softmax"), _refused("scoring_func", "'softmax'", "DeepSeek-V3 scores experts with a sigmoid")),
])
def test_v3_router_refusals_are_exact(changes, problem):
    assert _problems("deepseek_v3", **changes) == [problem]


def test_derived_keys_that_agree_are_accepted():
    cfg = from_hf_config({"model_type": "deepseek_v3", **_HF, "head_dim": 6, "qk_head_dim": 16, "moe_layer_freq": 1})
    assert (cfg.qk_rope_head_dim, cfg.qk_nope_head_dim, cfg.n_experts, cfg.moe_first_dense) == (6, 10, 8, 1)


@pytest.mark.parametrize("family", ["deepseek_v2", "deepseek_v3"])
def test_stale_derived_keys_are_ignored_and_another_eps_keeps_the_latent_norms_at_1e6(family):
    extra = {"num_experts_per_tok": 2} if family == "deepseek_v2" else {}
    cfg, ignored = import_hf_config({"model_type": family, **_HF, **extra, "head_dim": 16, "qk_head_dim": 6,
                                     "rms_norm_eps": 1e-5})
    assert ignored == ["head_dim: transformers derives it and sets it to 6",
                       "qk_head_dim: transformers derives it and sets it to 16"]
    assert (cfg.norm_eps, cfg.mla_norm_eps) == (1e-5, 1e-6)
    assert from_hf_config({"model_type": family, **_HF, **extra}).mla_norm_eps is None   # 1e-6: one eps


def test_every_layer_dense_reads_no_router():
    """first_k_dense_replace >= layers: transformers builds no MoE, so the routing keys are read but unused."""
    cfg = from_hf_config({"model_type": "deepseek_v3", **_HF, "first_k_dense_replace": 2, "topk_method": "greedy"})
    assert (cfg.n_experts, cfg.moe_layers) == (None, [False, False])


@pytest.mark.parametrize("extra,depth", [
    ({}, 1), (dict(num_nextn_predict_layers=0), None), (dict(num_mtp_layers=2), 2),
    (dict(num_mtp_layers=2, num_nextn_predict_layers=3), 3), (dict(num_nextn_predict_layers=3, num_mtp_layers=2), 3),
])
def test_mtp_depth_reads_both_names_as_transformers_does(extra, depth):
    """DeepseekV3Config's attribute_map sends num_mtp_layers to num_nextn_predict_layers (default 1); given both,
    num_nextn_predict_layers wins whatever the key order (transformers 5.24: 2 and 3 read as 3)."""
    assert from_hf_config({"model_type": "deepseek_v3", **_HF, **extra}).mtp_depth == depth


def test_prediction_modules_of_an_all_dense_model_are_listed_as_ignored():
    cfg, ignored = import_hf_config({"model_type": "deepseek_v3", **_HF, "first_k_dense_replace": 2})
    assert (cfg.mtp_depth, ignored) == (None, ["num_nextn_predict_layers: every layer is dense: its MoE "
                                               "prediction modules are not counted"])
