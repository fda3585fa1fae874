"""Kimi Delta Attention as one layer: the chunked and recurrent forms against each other and against transformers'
torch fallbacks (chunk_kimi_delta_attention, recurrent_kimi_delta_attention); the layer against Kimi Linear's with
the same weights; its closed forms (parameters, FLOPs with FlopCounterMode, saved bytes with saved-tensor hooks)
against the module."""
from __future__ import annotations

import itertools
import warnings

import pytest
import torch

from engine.layers import delta_rule, kda_rule
from engine.layers.attention import LayerKV
from engine.layers.gdn import GDNDims, gdn_state_shapes
from engine.layers.kda import KimiDeltaAttention, kda_core_flops, kda_matmul_params, kda_params, kda_saved_bytes
from engine.measure.flops import flop_counter
from tests.layer_checks import module_saved_bytes

kimi = pytest.importorskip("transformers.models.kimi_linear.modeling_kimi_linear")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def rule_inputs(B=2, T=37, H=4, dk=8, dv=6, seed=0, strength=2.0):
    """transformers' layout [B, T, heads, dim]; decays per key channel in [-strength, 0] per token."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, T, H, dk, generator=g), torch.randn(B, T, H, dk, generator=g),
            torch.randn(B, T, H, dv, generator=g), -strength * torch.rand(B, T, H, dk, generator=g),
            torch.rand(B, T, H, generator=g), torch.randn(B, H, dk, dv, generator=g))


def ours(q, k, v, g, beta):
    """[B, T, heads, dim] -> the kernels' [B, heads, T, dim], q and k normalized as the layer does."""
    dk = q.shape[-1]
    return ((delta_rule.l2_normalize(q) * dk ** -0.5).transpose(1, 2), delta_rule.l2_normalize(k).transpose(1, 2),
            v.transpose(1, 2), g.transpose(1, 2), beta.transpose(1, 2))


@pytest.mark.parametrize("chunk, initial, strength", list(itertools.product((1, 5, 16, 23, 64), (False, True),
                                                                           (2.0, 30.0))))
def test_chunked_and_recurrent_equal_transformers_fallbacks(chunk, initial, strength):
    """Decays of up to 30 per token and channel: exp(-gamma) alone would overflow fp32 within a chunk."""
    q, k, v, g, beta, s0 = rule_inputs(strength=strength)
    s0 = s0 if initial else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_o, ref_s = kimi.chunk_kimi_delta_attention(q, k, v, g, beta, chunk_size=chunk, initial_state=s0,
                                                       output_final_state=True, use_qk_l2norm_in_kernel=True)
        rec_o, rec_s = kimi.recurrent_kimi_delta_attention(q, k, v, g, beta, initial_state=s0,
                                                           output_final_state=True, use_qk_l2norm_in_kernel=True)
    o, s = kda_rule.chunked(*ours(q, k, v, g, beta), chunk, s0, want_state=True)
    o_rec, s_rec = delta_rule.recurrent(*ours(q, k, v, g, beta), s0)
    assert torch.isfinite(o).all()
    for a, b in ((o, ref_o), (s, ref_s), (o_rec, rec_o), (s_rec, rec_s), (o, o_rec), (s, s_rec)):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("nk", [1, 2])
def test_key_heads_serving_several_value_heads_equal_repeated_keys(nk):
    """nv = 4 value heads over nk key heads: the same as transformers' rule with each key head repeated."""
    q, k, v, g, beta, _ = rule_inputs(H=4)
    q, k = q[:, :, :nk], k[:, :, :nk]
    r = 4 // nk
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, _ = kimi.chunk_kimi_delta_attention(q.repeat_interleave(r, 2), k.repeat_interleave(r, 2), v, g, beta,
                                                 chunk_size=8, use_qk_l2norm_in_kernel=True)
    o, _ = kda_rule.chunked(*ours(q, k, v, g, beta), 8)
    torch.testing.assert_close(o, ref, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(delta_rule.recurrent(*ours(q, k, v, g, beta))[0], ref, atol=2e-5, rtol=1e-4)


def test_a_decay_shared_by_every_channel_is_gated_deltanet():
    q, k, v, g, beta, s0 = rule_inputs()
    shared = g[..., :1]
    args = ours(q, k, v, shared.expand_as(g), beta)
    gdn = delta_rule.chunked(*ours(q, k, v, shared[..., 0], beta), 8, s0, want_state=True)
    for a, b in zip(kda_rule.chunked(*args, 8, s0, want_state=True), gdn):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


def test_splitting_the_sequence_changes_nothing():
    args = ours(*rule_inputs()[:5])
    whole, s_whole = kda_rule.chunked(*args, 8, want_state=True)
    first, s1 = kda_rule.chunked(*(a[:, :, :20] for a in args), 8, want_state=True)
    rest, s2 = kda_rule.chunked(*(a[:, :, 20:] for a in args), 8, s1, want_state=True)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s2, s_whole, atol=1e-5, rtol=1e-5)


def test_training_form_has_the_gradients_of_plain_autograd():
    def run(fn):
        inputs = [t.clone().requires_grad_() for t in (*ours(*rule_inputs(T=13)[:5]), rule_inputs()[5])]
        o, s = fn(*inputs[:5], 4, inputs[5], True)
        (o.square().sum() + s.sin().sum()).backward()
        return [t.grad for t in inputs]
    train = lambda *a: delta_rule.chunked_train(*a, rule=kda_rule.chunked)   # noqa: E731
    for a, b in zip(run(kda_rule.chunked), run(train)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_pairwise_is_the_direct_sum():
    """M_ij = sum_d x_id k_jd exp(gamma_id - gamma_jd) below the diagonal, written out entry by entry."""
    g = torch.Generator().manual_seed(3)
    x, k = torch.randn(2, 21, 5, generator=g), torch.randn(2, 21, 5, generator=g)
    gamma = (-torch.rand(2, 21, 5, generator=g)).cumsum(1)
    want = torch.zeros(2, 21, 21)
    for i, j in itertools.product(range(21), range(21)):
        if j <= i:
            want[:, i, j] = (x[:, i] * k[:, j] * (gamma[:, i] - gamma[:, j]).exp()).sum(-1)
    for sub in (1, 4, 16, 32):
        torch.testing.assert_close(kda_rule.pairwise(x, k, gamma, sub), want, atol=1e-5, rtol=1e-5)
        counter = flop_counter()
        with counter:
            kda_rule.pairwise(x, k, gamma, sub)
        assert counter.get_total_flops() == 2 * kda_rule.pairwise_flops(21, 5, sub)


def pair(nk=2, dk=8, K=4, chunk=8, d=24):
    """transformers' KDA layer with every weight redrawn, and ours holding the same weights (Kimi Linear has one
    head count and width for q, k and v)."""
    from transformers import KimiLinearConfig

    from engine.interop.hf_models import scramble_
    config = KimiLinearConfig(hidden_size=d, num_hidden_layers=1, linear_attn_config=dict(
        num_heads=nk, head_dim=dk, short_conv_kernel_size=K, kda_layers=[1], full_attn_layers=[]))
    hf = kimi.KimiLinearDeltaAttention(config, 0)
    scramble_(hf)
    with torch.no_grad():   # built alone, the gate's A_log and dt_bias are left uninitialised: KDA's own ranges
        hf.forget_gate.A_log.copy_(torch.linspace(0, 2.7, nk).view(1, 1, nk, 1))
        hf.forget_gate.dt_bias.copy_(torch.linspace(-3, 3, nk * dk))
    layer = KimiDeltaAttention(GDNDims(d, nk, nk, dk, dk, K, chunk, config.rms_norm_eps))
    names = {"forget_gate.f_a_proj.weight": "f_a_proj.weight", "forget_gate.f_b_proj.weight": "f_b_proj.weight",
             "forget_gate.dt_bias": "dt_bias", "o_norm.weight": "norm_weight"}
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name == "forget_gate.A_log":
                layer.A_log.copy_(p.flatten())
            else:
                layer.get_parameter(names.get(name, name)).copy_(p)
    return hf, layer


@pytest.mark.parametrize("nk, K, T, chunk", [(2, 4, 21, 8), (4, 2, 9, 64), (1, 3, 30, 5), (2, 1, 5, 8)])
def test_layer_equals_transformers_layer(nk, K, T, chunk):
    hf, layer = pair(nk=nk, K=K, chunk=chunk)
    x = torch.randn(2, T, 24, generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf(x)
    torch.testing.assert_close(layer(x), ref, atol=5e-5, rtol=1e-4)


@pytest.mark.parametrize("K, state_dtype", [(4, torch.float32), (1, torch.float32), (3, torch.bfloat16)])
def test_decode_with_the_state_equals_one_forward(K, state_dtype):
    layer = KimiDeltaAttention(GDNDims(24, 2, 4, 8, 6, K, 4), state_dtype)
    layer.init_weights(0.2, 0.2, torch.Generator().manual_seed(0))
    x = torch.randn(2, 15, 24, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = layer(x)
        cache = LayerKV("fp8")
        steps = [layer(x[:, :6], cache=cache)] + [layer(x[:, t:t + 1], cache=cache) for t in range(6, 15)]
        cache2 = LayerKV("fp8")   # pieces of several tokens after the prompt (chunked prefill) start from the state too
        pieces = [layer(x[:, a:b], cache=cache2) for a, b in ((0, 6), (6, 8), (8, 9), (9, 12), (12, 15))]
    tol = 1e-5 if state_dtype == torch.float32 else 2e-2
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=tol, rtol=tol)
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole, atol=tol, rtol=tol)
    shapes = gdn_state_shapes(layer.dims, K - 1)
    assert cache.recurrent.shape[1:] == shapes["recurrent"] and cache.recurrent.dtype == state_dtype
    assert (cache.conv is None) == (K == 1)
    if K > 1:
        assert cache.conv.shape[1:] == shapes["conv"]


@pytest.mark.parametrize("nk, nv, K", [(2, 4, 4), (1, 3, 1), (3, 3, 2)])
def test_params_and_matmul_params_equal_the_module(nk, nv, K):
    dims = GDNDims(24, nk, nv, 8, 6, K, 8)
    layer = KimiDeltaAttention(dims).to("meta")
    p = kda_params(dims)
    assert sum(p.values()) == sum(t.numel() for t in layer.parameters())
    weight = {name: layer.get_parameter(f"{name}.weight").numel() for name in (
        "q_proj", "k_proj", "v_proj", "b_proj", "conv1d", "f_a_proj", "f_b_proj", "g_a_proj", "g_b_proj", "o_proj")}
    assert p["kda_in_proj"] == sum(weight[x] for x in ("q_proj", "k_proj", "v_proj", "b_proj"))
    assert (p["kda_conv"], p["kda_out_proj"]) == (weight["conv1d"], weight["o_proj"])
    assert kda_matmul_params(dims) == sum(weight.values())


@pytest.mark.parametrize("T, chunk, nk", list(itertools.product((1, 5, 8, 21, 40), (4, 8, 64), (1, 2))))
def test_flops_equal_flop_counter(T, chunk, nk):
    dims = GDNDims(24, nk, 4, 8, 6, 4, chunk)
    layer = KimiDeltaAttention(dims).to("meta")
    x = torch.randn(2, T, 24, device="meta", requires_grad=True)
    counter = flop_counter()
    with counter:
        y = layer(x)
        forward = counter.get_total_flops()
        y.sum().backward()
    assert forward == 2 * kda_matmul_params(dims) * 2 * T + kda_core_flops(dims, 2, T)
    backward = 2 * 2 * kda_matmul_params(dims) * 2 * T \
        + 2 * dims.v_heads * kda_rule.chunked_backward_flops(T, chunk, dims.k_dim, dims.v_dim)
    assert counter.get_total_flops() - forward == backward


@pytest.mark.parametrize("T, K, dtype, nk, chunk", list(itertools.product((1, 8, 21), (1, 4), ("fp32", "bf16"),
                                                                          (1, 2), (8, 64))))
def test_saved_bytes_equal_saved_tensor_hooks(T, K, dtype, nk, chunk):
    dims = GDNDims(24, nk, 4, 8, 6, K, chunk)
    layer = KimiDeltaAttention(dims).to(DTYPES[dtype])
    x = torch.randn(2, T, 24, dtype=DTYPES[dtype], requires_grad=True)
    assert sum(kda_saved_bytes(dims, 2, T, x.element_size()).values()) == module_saved_bytes(layer, x)


def test_a_decode_step_costs_six_state_products_per_value_head_whatever_the_context():
    """One KDA decode step per value head: read the state with the key (S^T k), write the rank-one correction,
    read it with the query (S^T q): 3 products of dk x dv, 2 FLOPs a multiply-add, so 6 dk dv, on top of 2 FLOPs
    per weight; the fixed state does not grow with the context (an all-KDA model, 3 layers, 2 sequences)."""
    from engine.budget.flops import decode_flops, matmul_params
    from engine.config import ModelConfig
    from tests.hybrid_cases import HYBRID_BASE
    cfg = ModelConfig(**{**HYBRID_BASE, "n_layers": 3, "layer_types": ("kda",) * 3, "gdn_k_heads": 2,
                         "gdn_v_heads": 4, "gdn_k_dim": 3, "gdn_v_dim": 5})
    step = 2 * 2 * matmul_params(cfg) + 3 * 2 * 4 * 6 * 3 * 5
    assert [decode_flops(cfg, 2, context) for context in (1, 100, 10_000)] == [step] * 3


@pytest.mark.parametrize("bad", [-1, 1.5, "four"])
def test_a_refused_value_head_count_is_reported_once(bad):
    """KDA's head rule (value heads a multiple of key heads) stays silent on a gdn_v_heads the field itself
    refuses: the user reads the one message about the value, not a second about multiples (or a crash)."""
    from engine.config import FIELDS, ConfigError, ModelConfig, field_problem
    from tests.hybrid_cases import HYBRID_BASE
    with pytest.raises(ConfigError) as e:
        ModelConfig(**{**HYBRID_BASE, "n_layers": 2, "layer_types": ("kda", "full"), "gdn_k_heads": 2,
                       "gdn_v_heads": bad})
    assert e.value.problems == [field_problem(FIELDS["gdn_v_heads"], bad)]
    assert e.value.problems[0].startswith(f"gdn_v_heads: {bad!r} is not an integer >= 1")
