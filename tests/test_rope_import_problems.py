"""The RoPE keys of an imported config.json, message by message: what is refused (the key, the value, why) and
what is accepted but listed as unread (`import-hf --verbose`), for each way a RoPE setting can fail to apply."""
import pytest

from engine.config import ConfigError
from engine.interop.hf_config import import_hf_config

LLAMA = {"model_type": "llama"}


@pytest.mark.parametrize("config,problem", [
    ({"model_type": "gemma3_text", "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                                       "sliding_attention": {"rope_type": "linear", "factor": 2.0}}},
     "rope_parameters.sliding_attention.rope_type: 'linear' is not expressible (local layers use plain RoPE)"),
    (dict(LLAMA, partial_rotary_factor=0.5),
     "partial_rotary_factor: 0.5 is not expressible (llama rotates the whole head)"),
    # the class default's heads are 6144 / 64 = 96 wide: int(96 * 0.01) = 0; named as GPT-NeoX spells it
    ({"model_type": "gpt_neox", "rotary_pct": 0.01},
     "rotary_pct: 0.01 is not expressible (rotates no dimension of the head)"),
    (dict(LLAMA, rope_scaling={"rope_type": "proportional", "factor": 8.0}),
     "rope_scaling.rope_type: 'proportional' is not expressible "
     "(supported RoPE types: default, linear, dynamic, llama3, yarn, longrope)"),
    (dict(LLAMA, rope_parameters={"rope_type": "linear", "factor": 2.0, "mrope_section": [2, 2]}),
     "rope_parameters.mrope_section: [2, 2] is not expressible (not a linear RoPE parameter we model)"),
    (dict(LLAMA, rope_parameters={"rope_type": "linear"}),
     "rope_parameters.factor: None is not expressible (rope_type linear needs a factor)"),
])
def test_rope_refusals_name_the_key_the_value_and_why(config, problem):
    with pytest.raises(ConfigError) as e:
        import_hf_config(config)
    assert e.value.problems == [problem]


@pytest.mark.parametrize("config,ignored", [
    (dict(LLAMA, rope_parameters={"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0}),
     "rope_parameters.low_freq_factor: not used by rope_type linear"),
    (dict(LLAMA, original_max_position_embeddings=4096),
     "original_max_position_embeddings: plain RoPE does not read it"),
    (dict(LLAMA, rope_parameters={"rope_type": "linear", "factor": 2.0}, original_max_position_embeddings=4096),
     "original_max_position_embeddings: rope_type linear does not read it"),
])
def test_unread_rope_keys_are_listed_with_the_reason(config, ignored):
    assert import_hf_config(config)[1] == [ignored]


def test_a_local_rope_mapping_without_rope_type_is_plain_rope():
    """Gemma-3's per-layer-type rope_parameters: a sliding_attention mapping that gives only its theta is plain
    RoPE at that base (transformers' standardisation adds rope_type "default"), imported, not refused."""
    cfg, ignored = import_hf_config({"model_type": "gemma3_text", "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_theta": 10000.0}}})
    assert (cfg.rope_base, cfg.rope_scaling, cfg.rope_factor, cfg.rope_local_base, ignored) == (
        1e6, "linear", 8.0, 10000.0, [])
