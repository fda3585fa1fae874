"""Writing a mixture-of-experts config.json (hf_moe_export.py): every field a family's router, layer pattern or
attention cannot express is one exact problem naming the field, its value and why; what is expressible reads
back to the same config. Pure stdlib: no transformers needed."""
import pytest

from engine.interop import from_hf_config
from engine.interop.hf_export import hf_problems

_B = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
          num_key_value_heads=2, max_position_embeddings=64)
BASE = {   # the parity cases of tests/test_interop_moe.py
    "mixtral": dict(_B, num_local_experts=8, num_experts_per_tok=2, sliding_window=6),
    "qwen2_moe": dict(_B, num_experts=6, num_experts_per_tok=3, moe_intermediate_size=16,
                      shared_expert_intermediate_size=40, mlp_only_layers=[0], norm_topk_prob=False),
    "qwen3_moe": dict(_B, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, decoder_sparse_step=2,
                      norm_topk_prob=True, head_dim=16),
    "olmoe": dict(_B, num_key_value_heads=4, num_experts=8, num_experts_per_tok=4, attention_bias=True),
}


def _cfg(family: str):
    return from_hf_config({"model_type": family, **BASE[family]})


@pytest.mark.parametrize("family", BASE)
def test_export_reads_back_to_the_same_config(family):
    out, problems = hf_problems(_cfg(family), family)
    assert problems == []
    assert from_hf_config({"model_type": family, **out}) == _cfg(family)


def _no(field: str, value: str, family: str, why: str = "") -> str:
    return f"{field}: {value} is not expressible in {family}" + (f" ({why})" if why else "")


@pytest.mark.parametrize("family,changes,problem", [
    ("mixtral", dict(router="sigmoid"), _no("router", "'sigmoid'", "mixtral", "softmax over all experts, then top-k")),
    ("mixtral", dict(router_renorm=False), _no("router_renorm", "False", "mixtral")),
    ("mixtral", dict(router_selection_bias=True), _no("router_selection_bias", "True", "mixtral")),
    ("mixtral", dict(router_groups=2), _no("router_groups", "2", "mixtral")),
    ("mixtral", dict(routed_scale=2.0), _no("routed_scale", "2.0", "mixtral")),
    ("mixtral", dict(expert_bias=True), _no("expert_bias", "True", "mixtral")),
    ("mixtral", dict(dropout=0.1), _no("dropout", "0.1", "mixtral", "dropout only on attention probabilities")),
    ("mixtral", dict(moe_first_dense=1), _no("moe_first_dense", "1", "mixtral", "every layer is MoE")),
    ("mixtral", dict(moe_every=2), _no("moe_every", "2", "mixtral", "every layer is MoE")),
    ("mixtral", dict(n_shared_experts=1), _no("n_shared_experts", "1", "mixtral", "no shared experts")),
    ("mixtral", dict(bias=True), _no("bias", "True", "mixtral")),
    ("mixtral", dict(qkv_bias=True), _no("qkv_bias", "True", "mixtral")),
    ("mixtral", dict(expert_d_ff=16), _no("expert_d_ff", "16", "mixtral", "experts use intermediate_size")),
    # full attention every 3rd layer: with 3 layers the window still skips one
    ("mixtral", dict(global_every=3), _no("global_every", "3", "mixtral", "the window applies to every layer")),
    ("qwen2_moe", dict(bias=True), _no("bias", "True", "qwen2_moe")),
    ("qwen2_moe", dict(attn_window=4),
     _no("attn_window", "4", "qwen2_moe", "sliding windows are not modelled for Qwen MoE")),
    ("qwen2_moe", dict(n_shared_experts=2), _no("n_shared_experts", "2", "qwen2_moe", "Qwen2-MoE has one shared expert")),
    ("qwen2_moe", dict(shared_expert_gate=False),
     _no("shared_expert_gate", "False", "qwen2_moe", "Qwen2-MoE gates its shared expert")),
    ("qwen3_moe", dict(qkv_bias=True), _no("qkv_bias", "True", "qwen3_moe")),
    ("qwen3_moe", dict(n_shared_experts=1), _no("n_shared_experts", "1", "qwen3_moe", "no shared experts")),
    ("qwen3_moe", dict(qk_norm=False), _no("qk_norm", "False", "qwen3_moe")),
    ("olmoe", dict(qkv_bias=True), _no("qkv_bias", "True", "olmoe", "OLMoE's attention_bias covers q, k, v and o alike")),
    ("olmoe", dict(attn_window=4), _no("attn_window", "4", "olmoe", "no sliding window")),
    ("olmoe", dict(head_dim=16), _no("head_dim", "16", "olmoe", "heads * head_dim must equal d_model")),
    ("olmoe", dict(expert_d_ff=16), _no("expert_d_ff", "16", "olmoe", "experts use intermediate_size")),
    ("olmoe", dict(moe_first_dense=1), _no("moe_first_dense", "1", "olmoe", "every layer is MoE")),
    ("olmoe", dict(n_shared_experts=1), _no("n_shared_experts", "1", "olmoe", "no shared experts")),
    ("olmoe", dict(qk_norm_scope="head"), _no("qk_norm_scope", "'head'", "olmoe")),
])
def test_each_inexpressible_field_is_one_exact_problem(family, changes, problem):
    assert hf_problems(_cfg(family).replace(**changes), family)[1] == [problem]
