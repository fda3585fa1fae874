"""Hugging Face parity for the state-space hybrid families (bamba, nemotron_h, granitemoehybrid, falcon_h1, jamba):
tiny random transformers models, every weight and buffer redrawn, converted with our converter give the same
logits within 1e-4 (fp32, CPU); the round trip gives the same state dict; decoding with our cache gives the full
forward's logits; the state and KV bytes we compute are the bytes of transformers' own cache tensors."""
import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.memory import kv_cache_bytes, state_bytes  # noqa: E402
from engine.interop import from_transformers, hf_model_from_config, scramble_, to_hf_config, to_transformers  # noqa: E402
from engine.interop.weights import pairs_for  # noqa: E402
from engine.model import KVCache  # noqa: E402
from tests.hf_checks import assert_same_weights, pairs_missing_from  # noqa: E402

transformers.logging.set_verbosity_error()
V, T = 61, 11
_BASE = dict(vocab_size=V, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=24,
             max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None)
_FALCON = dict(_BASE, num_hidden_layers=2, mamba_d_ssm=64, mamba_n_heads=4, mamba_d_state=6, mamba_n_groups=2,
               mamba_chunk_size=4, ssm_multipliers=[0.5, 1.5, 2.0, 0.25, 3.0], ssm_in_multiplier=0.7,
               ssm_out_multiplier=1.3, key_multiplier=0.8, attention_in_multiplier=1.2, attention_out_multiplier=0.9,
               mlp_multipliers=[0.6, 1.4], embedding_multiplier=2.0, lm_head_multiplier=0.5)
CASES = {
    # Mamba-2 (2 groups) in layers 0 and 2, attention with half-head RoPE in layer 1, a SwiGLU MLP after each
    "bamba": ("bamba", dict(_BASE, num_hidden_layers=3, attn_layer_indices=[1], mamba_n_heads=4, mamba_d_head=16,
                            mamba_d_state=6, mamba_n_groups=2, mamba_chunk_size=4)),
    # one mixer per layer: Mamba-2, attention (no RoPE), relu2 MLP, a DeepSeek-V3-routed MoE (2 groups, selection
    # bias, routed scale 2.5) with a shared expert
    "nemotron_h": ("nemotron_h", dict(_BASE, hybrid_override_pattern="M*-EM", mamba_num_heads=4, mamba_head_dim=8,
                                      ssm_state_size=6, n_groups=2, chunk_size=4, n_routed_experts=8,
                                      num_experts_per_tok=2, moe_intermediate_size=8,
                                      moe_shared_expert_intermediate_size=12, head_dim=8, n_group=2, topk_group=1,
                                      routed_scaling_factor=2.5, time_step_min=0.01)),
    # no E layer (as Nemotron-H 8B): the MoE keys are left out of the export, transformers' defaults
    "nemotron-dense": ("nemotron_h", dict(_BASE, hybrid_override_pattern="M*-M", mamba_num_heads=4, mamba_head_dim=8,
                                          ssm_state_size=6, n_groups=2, chunk_size=4, head_dim=8, time_step_min=0.01)),
    # an MoE (top-k logits, then softmax) with a shared MLP after every mixer; every Granite multiplier; no RoPE
    "granitemoehybrid": ("granitemoehybrid", dict(
        _BASE, num_hidden_layers=3, layer_types=["mamba", "attention", "mamba"], num_local_experts=4,
        num_experts_per_tok=2, shared_intermediate_size=12, mamba_n_heads=4, mamba_d_state=6, mamba_chunk_size=4,
        embedding_multiplier=3.0, residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=4.0,
        position_embedding_type="nope", mamba_conv_bias=False, time_step_limit=[0.0, 5.0])),
    # no experts: the shared MLP is the FFN; RoPE
    "granite-dense-rope": ("granitemoehybrid", dict(
        _BASE, num_hidden_layers=2, layer_types=["mamba", "attention"], num_local_experts=0,
        shared_intermediate_size=12, mamba_n_heads=4, mamba_d_state=6, mamba_chunk_size=4,
        position_embedding_type="rope")),
    # attention and Mamba-2 side by side, every muP multiplier, the gated norm after the gate ...
    "falcon_h1": ("falcon_h1", dict(_FALCON, mamba_rms_norm=True, mamba_norm_before_gate=False)),
    # ... before it, and no norm at all
    "falcon-norm-first": ("falcon_h1", dict(_FALCON, mamba_rms_norm=True, mamba_norm_before_gate=True)),
    "falcon-no-norm": ("falcon_h1", dict(_FALCON, mamba_rms_norm=False, mamba_proj_bias=True,
                                         projectors_bias=True)),
    # Mamba-1 with the dt/B/C norms, attention every 2nd layer from 1, an MoE (no renormalisation) likewise
    "jamba": ("jamba", dict(_BASE, num_hidden_layers=4, attn_layer_period=2, attn_layer_offset=1,
                            expert_layer_period=2, expert_layer_offset=1, num_experts=4, mamba_d_state=6,
                            mamba_dt_rank=3)),
    "jamba-dense": ("jamba", dict(_BASE, num_hidden_layers=3, attn_layer_period=3, attn_layer_offset=2,
                                  num_experts=1, mamba_d_state=5, mamba_expand=1, mamba_proj_bias=True)),
}


def _case(name: str):
    """(HF model, ours, ids): every parameter redrawn by scramble_, the buffers that feed the forward too
    (Nemotron-H's router e_score_correction_bias)."""
    i = list(CASES).index(name)
    torch.manual_seed(i)
    hf = hf_model_from_config(*CASES[name], attn_implementation="eager").eval()
    scramble_(hf, seed=i)
    g = torch.Generator().manual_seed(i)
    with torch.no_grad():
        for key, buf in hf.named_buffers():
            if key.endswith("e_score_correction_bias"):
                buf.copy_(torch.randn(buf.shape, generator=g) * 0.5)
    return hf, from_transformers(hf), torch.randint(0, V, (2, T), generator=g)


@pytest.fixture(scope="module")
def converted():
    return {}


def _get(converted, name):
    if name not in converted:
        converted[name] = _case(name)
    return converted[name]


@pytest.mark.parametrize("name", CASES)
def test_logits_match_transformers(converted, name):
    hf, ours, idx = _get(converted, name)
    with torch.no_grad():
        ref, got = hf(input_ids=idx).logits, ours(idx)
    assert ref.abs().max() > 0.5
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", CASES)
def test_round_trip_gives_identical_state_dict_and_family(converted, name):
    hf, ours, idx = _get(converted, name)
    back = to_transformers(ours, attn_implementation="eager")
    assert type(back) is type(hf)
    assert_same_weights(hf.state_dict(), back.state_dict(), CASES[name][0])
    assert to_hf_config(ours.cfg)[0] == CASES[name][0]
    with torch.no_grad():
        torch.testing.assert_close(back(input_ids=idx).logits, ours(idx), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", CASES)
def test_every_pair_names_a_transformers_tensor(converted, name):
    hf, ours, _ = _get(converted, name)
    assert pairs_missing_from(hf, pairs_for(ours.cfg, CASES[name][0])) == []


@pytest.mark.parametrize("name", CASES)
def test_decoding_with_our_cache_gives_the_full_forward_logits(converted, name):
    _, ours, idx = _get(converted, name)
    cache = KVCache(ours.cfg.n_layers)
    with torch.no_grad():
        full = ours(idx)
        steps = [ours(idx[:, :5], cache)] + [ours(idx[:, t:t + 1], cache) for t in range(5, T)]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-4, atol=1e-4)
    assert cache.kv_nbytes() == kv_cache_bytes(ours.cfg, 2, T, "fp32")
    assert cache.state_nbytes() == sum(state_bytes(ours.cfg, 2, "fp32", "vllm").values())


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", ["bamba", "nemotron_h", "falcon_h1", "jamba"])
def test_state_and_kv_bytes_equal_transformers_cache_tensors(converted, name, dtype):
    """transformers' hybrid cache after a prompt of 7 tokens, batch 3: its conv and recurrent tensors are our
    state bytes under its convention, its key/value tensors our KV bytes (attention layers only)."""
    hf, ours, _ = _get(converted, name)
    torch_dtype = torch.float32 if dtype == "fp32" else torch.bfloat16
    model = hf_model_from_config(*CASES[name]).to(torch_dtype).eval()
    with torch.no_grad():
        cache = model(torch.randint(0, V, (3, 7)), use_cache=True).past_key_values
    conv = recurrent = kv = 0
    for layer in cache.layers:
        conv += sum(t.nbytes for t in getattr(layer, "conv_states", {}).values() if t is not None)
        recurrent += sum(t.nbytes for t in getattr(layer, "recurrent_states", {}).values() if t is not None)
        kv += sum(t.nbytes for t in (getattr(layer, "keys", None), getattr(layer, "values", None))
                  if isinstance(t, torch.Tensor) and t.numel())
    assert {"conv": conv, "recurrent": recurrent} == state_bytes(ours.cfg, 3, dtype, "transformers")
    assert kv == kv_cache_bytes(ours.cfg, 3, 7, dtype)
