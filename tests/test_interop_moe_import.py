"""Reading a mixture-of-experts config.json (hf_moe.py): every value we cannot express is refused once, with the
exact message naming the HF key, its value and why; the layer pattern and expert keys read as transformers reads
them. Pure stdlib import: no transformers needed."""
import pytest

from engine.config import ConfigError
from engine.interop import from_hf_config


def _problems(d: dict) -> list[str]:
    with pytest.raises(ConfigError) as e:
        from_hf_config(d)
    return e.value.problems


def _refused(key: str, value: str, why: str) -> str:
    return f"{key}: {value} is not expressible ({why})"


@pytest.mark.parametrize("config,problems", [
    # the Llama-like sizes refuse attention dropout: one problem, not one per reader that looks at it
    ({"model_type": "mixtral", "attention_dropout": 0.1},
     [_refused("attention_dropout", "0.1", "our dropout also acts on the residual stream")]),
    # 1.0, not only 0.1: a jitter of exactly 1 must not pass for the allowed 0 / 0.0
    ({"model_type": "mixtral", "router_jitter_noise": 1.0},
     [_refused("router_jitter_noise", "1.0", "training-time input jitter of the router is not modelled")]),
    ({"model_type": "qwen2_moe", "num_hidden_layers": 3, "mlp_only_layers": [1]},
     [_refused("mlp_only_layers", "[1]", "dense layers must be the first ones (moe_first_dense)")]),
    # as many dense layers as layers: no MoE layer left (one fewer is fine, below)
    ({"model_type": "qwen2_moe", "num_hidden_layers": 3, "mlp_only_layers": [2, 0, 1]},
     [_refused("mlp_only_layers", "[0, 1, 2]", "leaves no MoE layer")]),
    ({"model_type": "qwen2_moe", "use_sliding_window": True},
     [_refused("use_sliding_window", "True", "qwen2_moe sliding windows are not modelled")]),
    ({"model_type": "qwen3_moe", "use_sliding_window": True},
     [_refused("use_sliding_window", "True", "qwen3_moe sliding windows are not modelled")]),
    ({"model_type": "qwen3_moe", "attention_bias": True},
     [_refused("attention_bias", "True", "Qwen3-MoE puts it on q, k, v and o but not the MLP")]),
    # Qwen2-MoE reads num_experts only (transformers keeps num_local_experts as an unused attribute)
    ({"model_type": "qwen2_moe", "num_experts": 4, "num_local_experts": 8},
     ["num_local_experts: unknown qwen2_moe config key; refusing to guess what it changes"]),
    ({"model_type": "olmoe", "hidden_size": 32, "num_attention_heads": 4, "head_dim": 16},
     [_refused("head_dim", "16", "OLMoE heads are hidden_size // num_attention_heads")]),
    ({"model_type": "olmoe", "clip_qkv": 8.0},
     [_refused("clip_qkv", "8.0", "clamping q, k, v is not modelled")]),
], ids=["attention_dropout", "router_jitter_noise", "dense_not_first", "all_dense", "qwen2_moe_window",
        "qwen3_moe_window", "qwen3_moe_attention_bias", "qwen2_moe_num_local_experts", "olmoe_head_dim",
        "olmoe_clip_qkv"])
def test_each_inexpressible_value_is_one_exact_problem(config, problems):
    assert _problems(config) == problems


def test_layer_pattern_keys():
    """(i+1) % decoder_sparse_step == 0 and i not in mlp_only_layers: the first dense layers, in any order."""
    cfg = from_hf_config({"model_type": "qwen2_moe", "num_hidden_layers": 4, "mlp_only_layers": [2, 0, 1]})
    assert (cfg.moe_first_dense, cfg.moe_every, cfg.moe_layers) == (3, 1, [False, False, False, True])
    plain = from_hf_config({"model_type": "qwen3_moe", "num_hidden_layers": 4, "mlp_only_layers": None,
                            "decoder_sparse_step": 2})
    assert (plain.moe_first_dense, plain.moe_every, plain.moe_layers) == (None, 2, [False, True, False, True])


def test_expert_count_keys():
    # Qwen3-MoE: num_experts is an alias of num_local_experts, and the latter wins when both are given
    # (transformers 5: Qwen3MoeConfig(num_experts=4, num_local_experts=8).num_local_experts == 8)
    assert from_hf_config({"model_type": "qwen3_moe", "num_experts": 4, "num_local_experts": 8}).n_experts == 8
    assert from_hf_config({"model_type": "qwen3_moe", "num_local_experts": 8}).n_experts == 8
    assert from_hf_config({"model_type": "qwen2_moe", "num_experts": 4}).n_experts == 4


def test_shared_expert_only_when_it_has_a_width():
    none = from_hf_config({"model_type": "qwen2_moe", "shared_expert_intermediate_size": 0})
    assert (none.n_shared_experts, none.shared_d_ff, none.shared_expert_gate) == (None, None, False)
    one = from_hf_config({"model_type": "qwen2_moe", "shared_expert_intermediate_size": 40})
    assert (one.n_shared_experts, one.shared_d_ff, one.shared_expert_gate) == (1, 40, True)

