"""DeepSeek-V2 (deepseek_v2) against transformers' DeepseekV2ForCausalLM: logits within 1e-5 and the same router
choices (fp32, tiny random models, every weight redrawn), with and without a query latent, greedy and
group_limited_greedy top-k; the same state dict back through to_transformers; parameter counts; what V2
cannot express is refused naming the key. YaRN's mscale_all_dim softmax correction, for V2 and V3."""
import pytest
import torch

from engine.budget.params import count_params
from engine.config import ConfigError, ModelConfig
from engine.layers.mla import mla_softmax_scale
from engine.model import build_model

transformers = pytest.importorskip("transformers", minversion="5.0")
from engine.interop import (from_hf_config, from_transformers, hf_model_from_config, scramble_,  # noqa: E402
                            to_transformers)
from tests.hf_checks import hooked_outputs  # noqa: E402

transformers.logging.set_verbosity_error()
V, T = 97, 12
_HF = dict(vocab_size=V, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
           num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=12, qk_rope_head_dim=6, qk_nope_head_dim=10,
           v_head_dim=14, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=2, first_k_dense_replace=1,
           routed_scaling_factor=1.5, max_position_embeddings=64, bos_token_id=None, eos_token_id=None,
           pad_token_id=None)
_GROUPED = dict(topk_method="group_limited_greedy", n_group=4, topk_group=2)
# factor 4 over an original 16 positions; mscale != mscale_all_dim, so yarn's cos/sin factor is not 1 either
YARN = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16, mscale=0.8, mscale_all_dim=0.707,
            rope_theta=10000.0)
CASES = {"q_lora_greedy": ("deepseek_v2", dict(_HF, q_lora_rank=20)),
         "no_q_lora_grouped": ("deepseek_v2", dict(_HF, q_lora_rank=None, **_GROUPED)),
         "q_lora_grouped_yarn": ("deepseek_v2", dict(_HF, q_lora_rank=20, rope_parameters=YARN, **_GROUPED)),
         "v3_yarn": ("deepseek_v3", dict(_HF, q_lora_rank=None, n_group=4, topk_group=2, n_shared_experts=1,
                                         rope_parameters=YARN))}


def _hf(name: str, seed: int = 0):
    family, config = CASES[name]
    torch.manual_seed(seed)
    hf = hf_model_from_config(family, config, attn_implementation="eager").eval()
    scramble_(hf, seed=seed)
    return hf


def _hf_choices(hf, idx) -> list[torch.Tensor]:
    """The experts transformers' routers choose, per MoE layer, sorted per token (top-k is unsorted there)."""
    gates = {i: layer.mlp.gate for i, layer in enumerate(hf.model.layers) if hasattr(layer.mlp, "gate")}
    got = hooked_outputs(gates, lambda: hf(input_ids=idx))
    return [got[i][2].sort(-1)[0] for i in sorted(got)]


@pytest.mark.parametrize("name", CASES)
def test_logits_and_router_choices_match_transformers(name):
    hf = _hf(name)
    ours = from_transformers(hf)
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want, got = hf(input_ids=idx).logits, ours(idx)
    assert (got - want).abs().max().item() < 1e-5
    ours_choices = [b.ffn.choice.sort(-1)[0] for b in ours.blocks if hasattr(b.ffn, "router")]
    hf_choices = _hf_choices(hf, idx)
    assert len(ours_choices) == len(hf_choices) == 2
    assert all(torch.equal(a, b) for a, b in zip(ours_choices, hf_choices))


def test_v2_settings_are_read_as_transformers_reads_them():
    greedy = from_transformers(_hf("q_lora_greedy")).cfg
    grouped = from_transformers(_hf("no_q_lora_grouped")).cfg
    assert (greedy.router, greedy.router_renorm, greedy.router_selection_bias, greedy.router_groups) == \
        ("softmax_topk", False, False, 1)
    assert (grouped.router_groups, grouped.router_group_topk, grouped.router_group_score) == (4, 2, "max")
    assert greedy.mla_rope_interleave and greedy.shared_width == 2 * 16 and greedy.moe_first_dense == 1
    assert (greedy.q_lora_rank, grouped.q_lora_rank) == (20, None)


@pytest.mark.parametrize("name", CASES)
def test_round_trip_gives_the_same_family_and_state_dict(name):
    hf = _hf(name)
    back = to_transformers(from_transformers(hf))
    assert type(back) is type(hf)
    want, got = hf.state_dict(), back.state_dict()
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def test_our_softmax_routed_mla_model_exports_as_deepseek_v2():
    """From our side: a model built here (our init, not transformers') goes to DeepseekV2ForCausalLM; the
    latent norms' eps must be transformers' fixed 1e-6, which the writer asks for by name."""
    from engine.interop.hf_export import to_hf_config
    cfg = ModelConfig(vocab_size=50, d_model=16, n_layers=2, n_heads=2, position="rope", norm="rmsnorm",
                      norm_bias=False, norm_eps=1e-6, ffn="swiglu", d_ff=24, bias=False, tie_embeddings=False,
                      kv_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=6, n_experts=4,
                      experts_per_token=2, expert_d_ff=8, n_shared_experts=1, router_renorm=False,
                      router_groups=2, router_group_topk=1, router_group_score="max")
    model = build_model(cfg, seed=0).eval()
    hf = to_transformers(model).eval()
    idx = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        gap = (hf(input_ids=idx).logits - model(idx)).abs().max().item()
    assert type(hf).__name__ == "DeepseekV2ForCausalLM" and hf.config.topk_method == "group_limited_greedy"
    assert gap < 1e-5
    with pytest.raises(ConfigError) as e:
        to_hf_config(cfg.replace(norm_eps=1e-5), "deepseek_v2")
    assert any(p.startswith("norm_eps") for p in e.value.problems)


@pytest.mark.parametrize("name", CASES)
def test_param_count_matches_transformers_and_the_built_model(name):
    hf = _hf(name)
    cfg = from_hf_config(hf.config.to_dict())
    n_hf = sum(p.numel() for p in hf.parameters())
    assert count_params(cfg).total == sum(p.numel() for p in build_model(cfg, device="meta").parameters()) == n_hf


@pytest.mark.parametrize("name", ["q_lora_grouped_yarn", "v3_yarn"])
def test_yarn_softmax_scale_is_transformers_scaling(name):
    """transformers multiplies 1/sqrt(qk_head_dim) by mscale(4, 0.707)^2; a few-line formula gives the same."""
    hf = _hf(name)
    cfg = from_transformers(hf).cfg
    import math
    by_hand = 16 ** -0.5 * (0.1 * 0.707 * math.log(4.0) + 1.0) ** 2
    assert cfg.rope_mscale_all_dim == 0.707
    assert mla_softmax_scale(cfg) == pytest.approx(by_hand, rel=1e-12)
    assert mla_softmax_scale(cfg) == pytest.approx(hf.model.layers[0].self_attn.scaling, rel=1e-12)
    assert mla_softmax_scale(cfg.replace(rope_mscale_all_dim=None)) == 16 ** -0.5


def test_mscale_all_dim_under_default_rope_is_ignored_as_transformers_ignores_it():
    """transformers applies mscale_all_dim only when rope_type is not "default" (deepseek_v3's
    yarn_apply_mscale), so a default-RoPE config carrying it imports with the plain 1/sqrt(d) scale."""
    rope = dict(rope_type="default", rope_theta=1e4, mscale_all_dim=0.707)
    hf = hf_model_from_config("deepseek_v3", dict(_HF, n_group=1, topk_group=1, rope_parameters=rope))
    cfg = from_transformers(hf).cfg
    assert cfg.rope_mscale_all_dim is None
    assert mla_softmax_scale(cfg) == 16 ** -0.5 == pytest.approx(hf.model.layers[0].self_attn.scaling, rel=1e-12)


@pytest.mark.parametrize("change,key", [
    (dict(topk_method="noaux_tc"), "topk_method"),
    (dict(scoring_func="sigmoid"), "scoring_func"),
    (dict(norm_topk_prob=True), "norm_topk_prob"),
    (dict(mlp_bias=True), "mlp_bias"),
    (dict(num_key_value_heads=2), "num_key_value_heads"),
    (dict(num_experts_per_tok=None), "num_experts_per_tok"),   # transformers has no default: top-k of None
    (dict(topk_method="group_limited_greedy", n_group=None, topk_group=None), "n_group"),
    (dict(rope_parameters=dict(rope_type="linear", factor=2.0, mscale_all_dim=1.0)),
     "rope_parameters.mscale_all_dim"),
])
def test_what_v2_cannot_express_is_refused_naming_the_key(change, key):
    with pytest.raises(ConfigError) as e:
        from_hf_config({"model_type": "deepseek_v2", **_HF, **change})
    assert any(p.startswith(key) for p in e.value.problems), e.value.problems


def test_mscale_is_ignored_without_yarn_or_without_mla():
    mla = ModelConfig(vocab_size=V, d_model=32, n_layers=1, n_heads=4, position="rope", norm="rmsnorm",
                      norm_bias=False, kv_lora_rank=12, qk_rope_head_dim=6, qk_nope_head_dim=10, v_head_dim=14,
                      rope_mscale_all_dim=0.707, rope_factor=4.0)
    assert mla_softmax_scale(mla) == 16 ** -0.5                                   # rope_scaling none
    assert mla_softmax_scale(mla.replace(rope_scaling="yarn")) > 16 ** -0.5
    plain = ModelConfig(vocab_size=V, d_model=32, n_layers=1, n_heads=4, position="rope", rope_scaling="yarn",
                        rope_factor=4.0)
    idx = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.equal(build_model(plain, seed=1)(idx),
                           build_model(plain.replace(rope_mscale_all_dim=0.707), seed=1)(idx))
