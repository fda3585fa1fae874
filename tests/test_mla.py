"""MLA (DeepSeek-V3 attention): logits parity with transformers' DeepseekV3 (tiny random models, every weight
re-drawn, fp32), with and without a query latent; latent-cache and expanded-cache decoding give the same
logits as a full forward; cache bytes == the closed form == the real cache tensors; parameters == the closed
form; field-named validation."""
import math

import pytest
import torch

from engine.config import ConfigError, ModelConfig
from engine.layers.kv_heads import attention_variants
from engine.layers.mla import mla_kv_bytes, mla_softmax_scale
from engine.model import KVCache, build_model
from engine.presets import PRESETS

transformers = pytest.importorskip("transformers", minversion="5.0")
from engine.interop import from_hf_config, from_transformers, hf_model_from_config, scramble_  # noqa: E402
from tests.hf_checks import assert_both_attention_paths_match, assert_counts_match, unit_scale_model  # noqa: E402

transformers.logging.set_verbosity_error()
V, T = 97, 12
# every layer of the tiny models MoE except the first (first_k_dense_replace=1), 8 experts in 4 groups
_HF = dict(vocab_size=V, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
           num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=12, qk_rope_head_dim=6, qk_nope_head_dim=10,
           v_head_dim=14, n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2, n_shared_experts=1,
           first_k_dense_replace=1, routed_scaling_factor=2.5, max_position_embeddings=64, bos_token_id=None,
           eos_token_id=None, pad_token_id=None)
CASES = {"q_lora": dict(_HF, q_lora_rank=20), "no_q_lora": dict(_HF, q_lora_rank=None),
         "dense_halves": dict(_HF, q_lora_rank=None, first_k_dense_replace=3, rope_interleave=False),
         # block norms at 1e-2, the latent norms still at transformers' fixed 1e-6 (mla_norm_eps)
         "norm_eps": dict(_HF, q_lora_rank=20, rms_norm_eps=1e-2)}


def _hf(name: str, seed: int = 0):
    torch.manual_seed(seed)
    hf = hf_model_from_config("deepseek_v3", CASES[name], attn_implementation="eager").eval()
    scramble_(hf, seed=seed)
    for layer in hf.model.layers:   # scramble_ leaves buffers: give the selection bias a value that matters
        if hasattr(layer.mlp, "gate"):
            layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8, generator=torch.Generator().manual_seed(1)) * .1)
    return hf


@pytest.mark.parametrize("name", CASES)
def test_logits_match_transformers_deepseek_v3(name):
    """Through SDPA and through the explicit softmax path (the one the attention maps are read from) alike."""
    hf = _hf(name)
    ours = from_transformers(hf)
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = hf(input_ids=idx).logits
    assert ours.cfg.attention_kind == "MLA"
    assert (ours.cfg.q_lora_rank is None) == (name in ("no_q_lora", "dense_halves"))
    assert_both_attention_paths_match(ours, idx, want)


@pytest.mark.parametrize("name", CASES)
def test_param_count_matches_transformers_and_closed_form(name):
    assert_counts_match(_hf(name))


def _tiny(**kw) -> ModelConfig:
    return ModelConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, position="rope", norm="rmsnorm",
                       norm_bias=False, ffn="swiglu", d_ff=48, bias=False, kv_lora_rank=12, qk_rope_head_dim=6,
                       qk_nope_head_dim=10, v_head_dim=14, **kw)


@pytest.mark.parametrize("kind", ["latent", "expanded"])
@pytest.mark.parametrize("q_lora", [None, 20])
def test_decode_with_either_cache_matches_full_forward_and_bytes_match(kind, q_lora):
    cfg = _tiny(q_lora_rank=q_lora)
    model = build_model(cfg, seed=1).eval()
    for a in model.attention_layers():
        a.cache_kind = kind
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(5))
    cache = KVCache(cfg.n_layers)
    with torch.no_grad():
        full = model(idx)
        steps = [model(idx[:, :5], cache)] + [model(idx[:, t:t + 1], cache) for t in range(5, T)]
    assert (torch.cat(steps, dim=1) - full).abs().max().item() < 1e-5
    e = 4
    assert cache.nbytes() == cfg.n_layers * mla_kv_bytes(cfg, 2, T, e, kind)
    per_token = (12 + 6) if kind == "latent" else 4 * (16 + 14)     # r + dr, or H * (dqk + dv)
    assert cache.nbytes() == cfg.n_layers * 2 * T * per_token * e
    shapes = {tuple(layer.k.shape) for layer in cache.layers}
    assert shapes == {(2, 1, T, 12)} if kind == "latent" else {(2, 4, T, 16)}


def test_deepseek_v3_latent_cache_bytes_per_token():
    cfg = ModelConfig(n_layers=61, d_model=7168, n_heads=128, position="rope", norm="rmsnorm", norm_bias=False,
                      kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128)
    assert 61 * mla_kv_bytes(cfg, 1, 1, 2) == (512 + 64) * 61 * 2 == 70_272
    assert mla_kv_bytes(cfg, 1, 1, 2, "expanded") == 128 * (192 + 128) * 2


def test_mla_validation_names_the_field():
    with pytest.raises(ConfigError) as e:
        ModelConfig(kv_lora_rank=8, n_kv_heads=4, qk_rope_head_dim=5, position="learned", attn_window=4)
    text = str(e.value)
    for name in ("n_kv_heads:", "qk_rope_head_dim:", "position:", "attn_window:"):
        assert name in text


@pytest.mark.parametrize("name", CASES)
def test_round_trip_to_transformers_gives_the_same_state_dict(name):
    from engine.interop import to_transformers
    hf = _hf(name)
    back = to_transformers(from_transformers(hf)).state_dict()
    want = hf.state_dict()
    assert back.keys() == want.keys()
    assert all(torch.equal(back[k], want[k]) for k in want)


@pytest.mark.parametrize("q_lora", [None, 20])
def test_flops_closed_form_equals_flop_counter_on_meta(q_lora):
    from engine.budget.flops import flops_budget
    from engine.measure.flops import counted_flops
    cfg = _tiny(q_lora_rank=q_lora)
    fwd, bwd = counted_flops(cfg, 2, 16)
    budget = flops_budget(cfg, 2, 16)
    assert (budget.forward_flops, budget.backward_flops) == (fwd, bwd)
    # by hand: query 32*4*16 (or 32*20 + 20*4*16), down 32*(12 + 6), up 12*4*(10 + 14), out 4*14*32,
    # SwiGLU 3*32*48 per layer, head 32*97; 2 FLOPs per weight per token, 2*16 tokens
    q = 32 * 4 * 16 if q_lora is None else 32 * 20 + 20 * 4 * 16
    layer = q + 32 * 18 + 12 * 4 * 24 + 4 * 14 * 32 + 3 * 32 * 48
    assert budget.matmul_flops == 2 * 32 * (2 * layer + 32 * 97)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("q_lora", [None, 20])
@pytest.mark.parametrize("v_head_dim", [14, 16])   # 16 == qk_head_dim: SDPA's flash kernel; 14: its math path
def test_activation_bytes_equal_saved_tensor_measurement(dtype, q_lora, v_head_dim):
    from engine.measure.activations import measure_activations
    cfg = _tiny(q_lora_rank=q_lora).replace(v_head_dim=v_head_dim, n_layers=2)
    m = measure_activations(cfg, 2, 8, "sdpa", dtype)
    assert m.estimate == m.measured


@pytest.mark.parametrize("impl", ["sdpa", "explicit"])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_activation_estimate_covers_both_kernels_with_and_without_dropout(impl, dropout):
    """With dropout SDPA falls back to its math path (fp32 on CPU); the explicit path keeps noise and dropped
    probabilities: both held exactly against saved-tensor hooks, dense and sparse."""
    from engine.measure.activations import measure_activations
    for cfg in (_tiny(q_lora_rank=20), _tiny(q_lora_rank=20, index_topk=3, index_n_heads=2, index_head_dim=8)):
        m = measure_activations(cfg.replace(dropout=dropout), 2, 7, impl)
        assert m.estimate == m.measured, (cfg.index_topk, m)


def test_attn_scale_replaces_the_default_one_over_sqrt_qk_head_dim():
    idx = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        default = build_model(_tiny(), seed=4)(idx)
        same = build_model(_tiny(attn_scale=16 ** -0.5), seed=4)(idx)     # qk_head_dim = 10 + 6
        other = build_model(_tiny(attn_scale=0.5), seed=4)(idx)
    assert torch.equal(default, same) and (default - other).abs().max() > 1e-4


def test_plain_attention_siblings_of_mla():
    kinds = attention_variants(PRESETS["deepseek-v3"].config)
    assert {k: (v.kv_lora_rank, v.head_width, v.kv_heads) for k, v in kinds.items()} == {
        "MHA": (None, 128, 128), "GQA-32": (None, 128, 32), "MQA": (None, 128, 1)}


def test_softmax_scale_takes_the_mscale_correction_only_under_yarn_past_factor_one():
    """attn_scale (else 1/sqrt(dn + dr)) times (0.1 m ln s + 1)^2, applied only with yarn and s > 1."""
    cfg = from_hf_config(dict(CASES["no_q_lora"], model_type="deepseek_v3"))
    assert cfg.qk_head_dim == 16 and cfg.rope_scaling == "none" and mla_softmax_scale(cfg) == 0.25
    assert mla_softmax_scale(cfg.replace(attn_scale=0.5)) == 0.5
    assert mla_softmax_scale(cfg.replace(rope_mscale_all_dim=0.707)) == 0.25
    assert mla_softmax_scale(cfg.replace(rope_scaling="linear", rope_factor=4.0, rope_mscale_all_dim=0.707)) == 0.25
    yarn = cfg.replace(rope_scaling="yarn", rope_factor=4.0, rope_original_context=16, rope_mscale_all_dim=0.707)
    assert mla_softmax_scale(yarn) == pytest.approx(0.25 * (0.1 * 0.707 * math.log(4.0) + 1.0) ** 2, rel=1e-12)
    assert mla_softmax_scale(yarn.replace(attn_scale=0.5)) == pytest.approx(2 * mla_softmax_scale(yarn), rel=1e-12)
    assert mla_softmax_scale(yarn.replace(rope_mscale_all_dim=None)) == 0.25
    slight = yarn.replace(rope_factor=1.5)   # any factor past 1 corrects
    assert mla_softmax_scale(slight) == pytest.approx(0.25 * (0.1 * 0.707 * math.log(1.5) + 1.0) ** 2, rel=1e-12)


SPARSE = dict(q_lora_rank=20, index_topk=3, index_n_heads=2, index_head_dim=8)


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("changes", [{}, SPARSE])
def test_explicit_path_equals_sdpa_in_float64_and_bf16(dtype, tol, changes):
    """The explicit path's softmax runs in fp32 or wider and its probabilities return to the model's dtype: a
    float64 model keeps float64 precision, a bf16 model mixes its bf16 values (dense and under the top-k mask)."""
    model = unit_scale_model(_tiny(**changes), dtype)
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        sdpa = model(idx)
        model.set_attention("explicit")
        explicit = model(idx)
    assert explicit.dtype == dtype and sdpa.abs().max() > 1.0
    torch.testing.assert_close(explicit, sdpa, atol=tol * sdpa.abs().max().item(), rtol=tol)


@pytest.mark.parametrize("changes", [{}, SPARSE])
def test_kept_probabilities_are_the_softmax_over_the_visible_keys(changes):
    """What the attention maps plot: per layer [B, H, T, S] rows that sum to 1, zero on future keys (and, with
    sparse attention, on every key the indexer dropped); nothing is kept unless asked."""
    model = unit_scale_model(_tiny(**changes))
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(5))
    model.set_attention("explicit")
    model(idx)
    assert all(a.probs is None for a in model.attention_layers())
    model.set_attention("explicit", keep_probs=True)
    model(idx)   # with autograd on: the kept maps must not hold the graph
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    for a in model.attention_layers():
        p = a.probs
        assert p.shape == (2, 4, T, T) and not p.requires_grad
        torch.testing.assert_close(p.sum(-1), torch.ones(2, 4, T))
        assert (p[..., future] == 0).all()
        seen = (p > 0).sum(-1)   # every visible key, or min(t + 1, top-k) of them
        want = torch.arange(1, T + 1) if not changes else torch.arange(1, T + 1).clamp(max=3)
        assert (seen == want).all()


@pytest.mark.parametrize("impl", ["sdpa", "explicit"])
def test_attention_dropout_acts_only_in_training(impl):
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(5))
    plain = unit_scale_model(_tiny(q_lora_rank=20))
    model = unit_scale_model(_tiny(q_lora_rank=20, dropout=0.3))
    for m in (plain, model):
        m.set_attention(impl)
    with torch.no_grad():
        torch.testing.assert_close(model(idx), plain(idx))     # eval: dropout off
        model.train()
        torch.manual_seed(0)
        assert (model(idx) - plain(idx)).abs().max() > 1e-2
