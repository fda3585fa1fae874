"""Hugging Face parity for the mixture-of-experts families: tiny random transformers models (every weight
re-drawn) converted with our converter give the same logits within 1e-5 (fp32, CPU) and the same router
choices in every layer; the round trip gives the same state dict; counts equal transformers'."""
import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.params import count_params  # noqa: E402
from tests.hf_checks import assert_same_weights, convert_cases, pairs_missing_from  # noqa: E402
from engine.interop import to_hf_config, to_transformers  # noqa: E402
from engine.interop.weights import pairs_for  # noqa: E402

transformers.logging.set_verbosity_error()
V, T = 97, 16
_BASE = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, bos_token_id=None, eos_token_id=None, pad_token_id=None,
             max_position_embeddings=64)

CASES = {
    # 8 experts, top-2, always renormalised; GQA; sliding window 6
    "mixtral": ("mixtral", dict(_BASE, num_local_experts=8, num_experts_per_tok=2, sliding_window=6)),
    # 6 experts top-3 without renormalisation, shared expert behind a sigmoid gate, layer 0 dense, q/k/v biases
    "qwen2_moe": ("qwen2_moe", dict(_BASE, num_experts=6, num_experts_per_tok=3, moe_intermediate_size=16,
                                    shared_expert_intermediate_size=40, mlp_only_layers=[0], norm_topk_prob=False)),
    # 8 experts top-2 renormalised, every 2nd layer MoE, per-head QK-norm, head_dim 16 != 32/4
    "qwen3_moe": ("qwen3_moe", dict(_BASE, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                                    decoder_sparse_step=2, norm_topk_prob=True, head_dim=16)),
    # 8 experts top-4, no renormalisation, QK-norm over all heads, attention biases
    "olmoe": ("olmoe", dict(_BASE, num_key_value_heads=4, num_experts=8, num_experts_per_tok=4,
                            attention_bias=True)),
}


@pytest.fixture(scope="module")
def converted():
    return convert_cases(CASES, V, T)


def _hf_choices(hf, idx) -> list[torch.Tensor]:
    """The experts transformers' routers pick, layer by layer (router forward returns logits, weights, idx)."""
    seen = []
    hooks = [layer.mlp.gate.register_forward_hook(lambda m, i, o: seen.append(o[2]))
             for layer in hf.model.layers if hasattr(layer.mlp, "experts")]
    try:
        logits = hf(input_ids=idx).logits
    finally:
        for h in hooks:
            h.remove()
    return logits, seen


@pytest.mark.parametrize("name", CASES)
def test_logits_and_router_choices_match_transformers(converted, name):
    hf, ours, idx = converted[name]
    with torch.no_grad():
        ref, hf_choices = _hf_choices(hf, idx)
        got = ours(idx)
    assert ref.abs().max() > 1.0
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    ours_choices = [m.choice for m in ours.moe_layers()]
    assert len(ours_choices) == len(hf_choices) == sum(ours.cfg.moe_layers) > 0
    for a, b in zip(ours_choices, hf_choices):
        assert torch.equal(a.sort(-1)[0], b.sort(-1)[0])


@pytest.mark.parametrize("name", CASES)
def test_round_trip_gives_identical_state_dict(converted, name):
    hf, ours, _ = converted[name]
    back = to_transformers(ours, attn_implementation="eager")
    assert type(back) is type(hf)
    assert_same_weights(hf.state_dict(), back.state_dict(), CASES[name][0])
    assert to_hf_config(ours.cfg)[0] == CASES[name][0]


@pytest.mark.parametrize("name", CASES)
def test_every_pair_names_a_transformers_tensor(converted, name):
    """The mapping lists no module transformers lacks (such a pair would be skipped silently on both ways)."""
    hf, ours, _ = converted[name]
    assert pairs_missing_from(hf, pairs_for(ours.cfg, CASES[name][0])) == []


@pytest.mark.parametrize("name", CASES)
def test_counts_equal_transformers(converted, name):
    hf, ours, _ = converted[name]
    assert count_params(ours.cfg).total == sum(p.numel() for p in hf.parameters())


def test_the_router_semantics_matter(converted):
    """Renormalising (or not) changes the logits: the parity above would notice a wrong router_renorm."""
    hf, ours, idx = converted["qwen2_moe"]
    from engine.model import build_model
    other = build_model(ours.cfg.replace(router_renorm=True))
    other.load_state_dict(ours.state_dict())
    with torch.no_grad():
        assert (other.eval()(idx) - hf(input_ids=idx).logits).abs().max() > 1e-2
