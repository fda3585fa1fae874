"""Writing a DeepSeek config.json (hf_deepseek_export.py): what the V2 and V3 writers write reads back to the
same config (MoE, grouped or not, and all dense), and each field they cannot express is one exact problem naming
the field, its value and why. Pure stdlib: no transformers needed."""
import pytest

from engine.interop import from_hf_config
from engine.interop.hf_export import hf_problems

# the tiny MLA + MoE sizes of tests/test_mla.py: layer 0 dense, 8 experts in 4 groups
_HF = dict(vocab_size=97, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=2,
           num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=12, qk_rope_head_dim=6, qk_nope_head_dim=10,
           v_head_dim=8, q_lora_rank=20, n_routed_experts=8, n_group=4, topk_group=2, num_experts_per_tok=2,
           first_k_dense_replace=1, max_position_embeddings=64)
CASES = {"deepseek_v3": ("deepseek_v3", _HF),
         "deepseek_v2": ("deepseek_v2", dict(_HF, topk_method="group_limited_greedy")),
         "deepseek_v2_greedy": ("deepseek_v2", dict(_HF, topk_method="greedy")),
         "deepseek_v3_dense": ("deepseek_v3", dict(_HF, first_k_dense_replace=2))}


def _cfg(case: str):
    family, config = CASES[case]
    return from_hf_config({"model_type": family, **config})


@pytest.mark.parametrize("case", CASES)
def test_export_reads_back_to_the_same_config(case):
    family = CASES[case][0]
    out, problems = hf_problems(_cfg(case), family)
    assert problems == []
    assert from_hf_config({"model_type": family, **out}) == _cfg(case)


def test_v2_top_k_method_follows_the_groups():
    assert hf_problems(_cfg("deepseek_v2"), "deepseek_v2")[0]["topk_method"] == "group_limited_greedy"
    assert hf_problems(_cfg("deepseek_v2_greedy"), "deepseek_v2")[0]["topk_method"] == "greedy"
    assert hf_problems(_cfg("deepseek_v3_dense"), "deepseek_v3")[0]["first_k_dense_replace"] == 2


def _no(field: str, value: str, family: str, why: str = "") -> str:
    return f"{field}: {value} is not expressible in {family}" + (f" ({why})" if why else "")


_BOTH = [
    (dict(block="parallel"), "block", "'parallel'", ""),
    (dict(bias=True), "bias", "True", "DeepSeek's attention_bias leaves the MLP without biases"),
    (dict(norm_eps=1e-5), "norm_eps", "1e-05", "transformers keeps the latent norms at eps 1e-6"),
    (dict(dropout=0.1), "dropout", "0.1", "dropout only on attention probabilities"),
    (dict(moe_every=2), "moe_every", "2", "every layer after the dense ones is MoE"),
    (dict(expert_bias=True), "expert_bias", "True", ""),
    (dict(shared_expert_gate=True), "shared_expert_gate", "True", ""),
    (dict(shared_d_ff=32), "shared_d_ff", "32", "shared experts have the routed width"),
    (dict(n_shared_experts=None), "n_shared_experts", "None", "{family} always builds shared experts"),
    (dict(kv_lora_rank=None), "kv_lora_rank", "None", "{family} attention is MLA"),
]


@pytest.mark.parametrize("family", ["deepseek_v2", "deepseek_v3"])
@pytest.mark.parametrize("changes,field,value,why", _BOTH)
def test_each_inexpressible_field_is_one_exact_problem(family, changes, field, value, why):
    problem = _no(field, value, family, why.format(family=family))
    assert hf_problems(_cfg(family).replace(**changes), family)[1] == [problem]


@pytest.mark.parametrize("family,changes,problem", [
    ("deepseek_v3", dict(router="softmax_topk"),
     _no("router", "'softmax_topk'", "deepseek_v3", "DeepSeek-V3 scores experts with a sigmoid")),
    ("deepseek_v3", dict(router_selection_bias=False),
     _no("router_selection_bias", "False", "deepseek_v3", "DeepSeek-V3 always has e_score_correction_bias")),
    ("deepseek_v3", dict(router_group_score="max"),
     _no("router_group_score", "'max'", "deepseek_v3", "DeepSeek-V3 scores a group by its two best experts")),
    ("deepseek_v2", dict(mla_rope_interleave=False),
     _no("mla_rope_interleave", "False", "deepseek_v2", "DeepSeek-V2 always rotates adjacent pairs")),
    ("deepseek_v2", dict(router="sigmoid"),
     _no("router", "'sigmoid'", "deepseek_v2", "DeepSeek-V2 takes the top-k of a softmax over all experts")),
    ("deepseek_v2", dict(router_renorm=True),
     _no("router_renorm", "True", "deepseek_v2", "transformers' DeepSeek-V2 never renormalises the top-k weights")),
    ("deepseek_v2", dict(router_selection_bias=True), _no("router_selection_bias", "True", "deepseek_v2")),
    ("deepseek_v2", dict(router_group_score="top2_sum"),
     _no("router_group_score", "'top2_sum'", "deepseek_v2", "DeepSeek-V2 scores a group by its best expert")),
])
def test_each_router_refusal_is_exact(family, changes, problem):
    assert hf_problems(_cfg(family).replace(**changes), family)[1] == [problem]
