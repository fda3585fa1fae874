"""Writing a gpt-oss config.json (hf_gpt_oss.py's writer): what it writes reads back to the same config, and each
field gpt-oss's MoE or attention cannot express is one exact problem naming the field, its value and why; a
quantization other than MXFP4 is refused on import with the exact key and reason. Pure stdlib."""
import pytest

from engine.config import ConfigError
from engine.interop import from_hf_config
from engine.interop.hf_config import import_hf_config
from engine.interop.hf_export import hf_problems

# the sizes of tests/test_interop_gpt_oss.py (default layer pattern: sliding, full, sliding, full)
_HF = dict(vocab_size=97, hidden_size=32, intermediate_size=24, head_dim=12, num_attention_heads=4,
           num_key_value_heads=2, num_hidden_layers=4, num_local_experts=6, num_experts_per_tok=2, sliding_window=5,
           max_position_embeddings=64)


def _cfg():
    return from_hf_config({"model_type": "gpt_oss", **_HF})


def test_export_reads_back_to_the_same_config():
    out, problems = hf_problems(_cfg(), "gpt_oss")
    assert problems == []
    assert out["layer_types"] == ["sliding_attention", "full_attention"] * 2
    assert from_hf_config({"model_type": "gpt_oss", **out}) == _cfg()


def _no(field: str, value: str, why: str = "gpt-oss's MoE") -> str:
    return f"{field}: {value} is not expressible in gpt_oss" + (f" ({why})" if why else "")


@pytest.mark.parametrize("changes,problem", [
    (dict(ffn="swiglu"), _no("ffn", "'swiglu'")),
    (dict(router="softmax_topk"), _no("router", "'softmax_topk'")),
    (dict(expert_bias=False), _no("expert_bias", "False")),
    (dict(router_selection_bias=True), _no("router_selection_bias", "True")),
    (dict(router_groups=2), _no("router_groups", "2")),
    (dict(routed_scale=2.0), _no("routed_scale", "2.0")),
    (dict(n_shared_experts=1), _no("n_shared_experts", "1")),
    (dict(moe_first_dense=1), _no("moe_first_dense", "1")),
    (dict(moe_every=2), _no("moe_every", "2")),
    (dict(bias=False, qkv_bias=True), _no("qkv_bias", "True", "attention_bias covers q, k, v and o alike")),
    (dict(expert_d_ff=16), _no("expert_d_ff", "16", "experts use intermediate_size")),
    (dict(dropout=0.1), _no("dropout", "0.1", "dropout only on attention probabilities")),
    (dict(attn_sinks=False), _no("attn_sinks", "False", "")),
])
def test_each_inexpressible_field_is_one_exact_problem(changes, problem):
    assert hf_problems(_cfg().replace(**changes), "gpt_oss")[1] == [problem]


def test_other_quantization_is_refused_exactly():
    with pytest.raises(ConfigError) as e:
        from_hf_config({"model_type": "gpt_oss", **_HF, "quantization_config": {"quant_method": "hqq"}})
    assert e.value.problems == ["quantization_config.quant_method: 'hqq' is not expressible (mxfp4, fp8, "
                                "compressed-tensors, bitsandbytes, awq and gptq are read)"]


def test_a_bare_quantization_name_is_refused_too():
    with pytest.raises(ConfigError) as e:
        from_hf_config({"model_type": "gpt_oss", **_HF, "quantization_config": "gptq"})
    assert e.value.problems == ["quantization_config: 'gptq' is not expressible (a mapping with quant_method is read)"]


def test_mxfp4_is_read_as_the_checkpoint_format():
    cfg, ignored = import_hf_config({"model_type": "gpt_oss", **_HF, "quantization_config": {"quant_method": "mxfp4"}})
    assert cfg.ckpt_format == "mxfp4" and not any(i.startswith("quantization_config") for i in ignored)


def test_rope_keys_and_the_expert_alias_read_like_transformers():
    """GptOssConfig: no rope mapping means YaRN x32 at rope_theta (default 150000); a given rope_scaling or
    rope_parameters replaces it (theta default still 150000); num_experts is an alias of num_local_experts."""
    def cfg(**extra):
        return from_hf_config({"model_type": "gpt_oss", **_HF, **extra})
    yarn = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16)
    assert (cfg().rope_base, cfg().rope_factor) == (150000.0, 32.0)
    assert (cfg(rope_theta=5e5).rope_base, cfg(rope_theta=5e5).rope_factor) == (5e5, 32.0)
    for key in ("rope_scaling", "rope_parameters"):
        assert (cfg(**{key: yarn}).rope_base, cfg(**{key: yarn}).rope_factor) == (150000.0, 4.0), key
    alias = {k: v for k, v in _HF.items() if k != "num_local_experts"}
    assert from_hf_config({"model_type": "gpt_oss", **alias, "num_experts": 4}).n_experts == 4


def test_both_expert_keys_and_attention_bias():
    """num_local_experts wins over its alias (GptOssConfig's attribute_map); attention_bias is `bias` here."""
    assert from_hf_config({"model_type": "gpt_oss", **_HF, "num_experts": 4}).n_experts == 6
    assert from_hf_config({"model_type": "gpt_oss", **_HF, "attention_bias": False}).bias is False


def test_rope_theta_is_taken_as_given_even_zero():
    """GptOssConfig(rope_theta=0) keeps 0 in its YaRN mapping (transformers 5.24); a zero base is then refused by
    name rather than replaced by the default 150000."""
    with pytest.raises(ConfigError) as e:
        from_hf_config({"model_type": "gpt_oss", **_HF, "rope_theta": 0})
    assert e.value.problems == ["rope_theta: 0.0 is not a number > 1 (rope_base)"]


def test_keys_transformers_does_not_read_are_listed_with_their_reasons():
    _, ignored = import_hf_config({"model_type": "gpt_oss", **_HF, "hidden_act": "silu", "experts_per_token": 2,
                                   "initial_context_length": 4096})
    assert ignored == [
        "hidden_act: gpt-oss experts always apply the clamped SwiGLU; GptOssConfig's hidden_act is unused",
        "experts_per_token: OpenAI's name for num_experts_per_tok; transformers reads the latter",
        "initial_context_length: OpenAI's name for the YaRN original context; transformers reads "
        "rope_scaling.original_max_position_embeddings"]
