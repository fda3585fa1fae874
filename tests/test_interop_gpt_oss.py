"""Hugging Face parity for gpt-oss: a tiny random GptOssForCausalLM (every weight redrawn, sinks and biases
included, expert pre-activations pushed past the clamp) converted with our converter gives the same logits
within 1e-5 (fp32, CPU) and the same router choices in every layer; the round trip gives the same state dict;
counts equal transformers'; config keys transformers ignores are listed, keys we cannot express refused."""
import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.params import count_params  # noqa: E402
from engine.config import ConfigError  # noqa: E402
from engine.interop import (from_transformers, hf_model_from_config, scramble_, to_hf_config,  # noqa: E402
                            to_transformers)
from engine.interop.hf_config import import_hf_config  # noqa: E402
from engine.interop.hf_gpt_oss import gpt_oss_pairs  # noqa: E402
from tests.hf_checks import assert_same_weights, hf_active, hf_meta, pairs_missing_from  # noqa: E402

transformers.logging.set_verbosity_error()
V, T = 97, 20
# head_dim 12 != 32 / 4; GQA 4/2; a window of 5 on layers 1 and 4 only; YaRN; 6 experts, top-2; limit 5
CONFIG = dict(vocab_size=V, hidden_size=32, intermediate_size=24, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=12, num_local_experts=6, num_experts_per_tok=2, sliding_window=5,
              layer_types=["sliding_attention", "full_attention", "full_attention", "sliding_attention"],
              max_position_embeddings=64, swiglu_limit=5.0, bos_token_id=None, eos_token_id=None,
              pad_token_id=None, rope_parameters=dict(rope_type="yarn", rope_theta=150000.0, factor=4.0,
                                                      beta_fast=32.0, beta_slow=1.0, truncate=False,
                                                      original_max_position_embeddings=16))


@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(0)
    hf = hf_model_from_config("gpt_oss", CONFIG, attn_implementation="eager").eval()
    scramble_(hf, seed=0)
    with torch.no_grad():   # pre-activations well past the limit, so the clamp changes the result
        for layer in hf.model.layers:
            layer.mlp.experts.gate_up_proj.mul_(6.0)
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(0))
    return hf, from_transformers(hf), idx


def _hf_run(hf, idx):
    seen = []
    hooks = [layer.mlp.router.register_forward_hook(lambda m, i, o: seen.append(o[2])) for layer in hf.model.layers]
    try:
        return hf(input_ids=idx).logits, seen
    finally:
        for h in hooks:
            h.remove()


def test_config_reads_every_gpt_oss_feature(pair):
    _, ours, _ = pair
    c = ours.cfg
    assert (c.attn_sinks, c.ffn, c.swiglu_limit, c.swiglu_alpha) == (True, "swiglu_clamped", 5.0, 1.702)
    assert (c.router, c.expert_bias, c.bias, c.n_experts, c.experts_per_token) == ("topk_softmax", True, True, 6, 2)
    assert c.layer_windows == [5, None, None, 5] and c.head_dim == 12
    assert (c.rope_scaling, c.rope_factor, c.rope_original_context, c.rope_truncate) == ("yarn", 4.0, 16, False)


def test_logits_and_router_choices_match_transformers(pair):
    hf, ours, idx = pair
    with torch.no_grad():
        ref, hf_choices = _hf_run(hf, idx)
        got = ours(idx)
        unclamped = build_unclamped(ours)(idx)
    assert ref.abs().max() > 1.0
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert (unclamped - ref).abs().max() > 1e-2          # the clamp bites in this model
    ours_choices = [m.choice for m in ours.moe_layers()]
    assert len(ours_choices) == len(hf_choices) == 4
    for a, b in zip(ours_choices, hf_choices):
        assert torch.equal(a.sort(-1)[0], b.sort(-1)[0])


def build_unclamped(ours):
    from engine.model import build_model
    model = build_model(ours.cfg.replace(swiglu_limit=1e9), init=False)
    model.load_state_dict(ours.state_dict())
    return model.eval()


def test_round_trip_gives_identical_state_dict_and_logits(pair):
    """The exported model computes what the original did: its config carries every knob the weights do not (the
    clamp limit 5, not transformers' default 7, binds on these scaled experts)."""
    hf, ours, idx = pair
    back = to_transformers(ours, attn_implementation="eager").eval()
    assert type(back) is type(hf) and to_hf_config(ours.cfg)[0] == "gpt_oss"
    assert_same_weights(hf.state_dict(), back.state_dict(), "gpt_oss")
    with torch.no_grad():
        torch.testing.assert_close(back(input_ids=idx).logits, hf(input_ids=idx).logits, rtol=0, atol=0)


def test_every_pair_names_a_transformers_tensor(pair):
    """The mapping lists no module transformers lacks (such a pair would be skipped silently on both ways)."""
    hf, ours, _ = pair
    assert pairs_missing_from(hf, gpt_oss_pairs(ours.cfg)) == []


def test_counts_equal_transformers(pair):
    hf, ours, _ = pair
    count = count_params(ours.cfg)
    assert count.total == sum(p.numel() for p in hf.parameters()) == sum(p.numel() for p in ours.parameters())
    assert count.active == hf_active(hf)


def test_ignored_keys_are_listed_mxfp4_is_kept_and_other_quantization_refused():
    published = dict(CONFIG, model_type="gpt_oss", hidden_act="silu", experts_per_token=2, initial_context_length=16,
                     quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]})
    cfg, ignored = import_hf_config(published)
    assert {line.split(":")[0] for line in ignored} >= {"hidden_act", "experts_per_token", "initial_context_length"}
    assert cfg.ckpt_format == "mxfp4" and cfg.ckpt_keep is None     # the storage kept, for plan --quant checkpoint
    assert count_params(cfg).total == sum(p.numel() for p in hf_meta(published).parameters())
    with pytest.raises(ConfigError) as e:
        import_hf_config(dict(published, quantization_config={"quant_method": "hqq"}))
    assert any(p.startswith("quantization_config.quant_method") for p in e.value.problems)


def test_a_wrong_type_or_range_names_the_key():
    for key, value in (("swiglu_limit", "7"), ("swiglu_alpha", True), ("swiglu_limit", -1.0)):
        with pytest.raises(ConfigError) as e:
            import_hf_config(dict(CONFIG, model_type="gpt_oss", **{key: value}))
        assert any(p.startswith(key) for p in e.value.problems), (key, e.value.problems)


# the published files' legacy key (rope_scaling, theta at the top): its YaRN, not the class default's
_LEGACY = dict(rope_theta=50000.0, rope_scaling=dict(rope_type="yarn", factor=4.0, beta_fast=32.0, beta_slow=1.0,
                                                     truncate=False, original_max_position_embeddings=16))


@pytest.mark.parametrize("rope", [{}, _LEGACY], ids=["no rope keys", "rope_scaling"])
def test_a_config_without_rope_parameters_reads_rope_as_transformers(rope):
    """No rope mapping: GptOssConfig's default YaRN (factor 32 over 4096); a legacy rope_scaling: that one."""
    kwargs = {k: v for k, v in CONFIG.items() if k != "rope_parameters"} | rope
    cfg, _ = import_hf_config(kwargs | {"model_type": "gpt_oss"})
    rp = transformers.AutoConfig.for_model("gpt_oss", **kwargs).rope_parameters
    assert rp["factor"] == (4.0 if rope else 32.0)
    assert (cfg.rope_scaling, cfg.rope_factor, cfg.rope_original_context, cfg.rope_base) == (
        rp["rope_type"], rp["factor"], rp["original_max_position_embeddings"], rp["rope_theta"])
