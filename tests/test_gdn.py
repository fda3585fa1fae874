"""Gated DeltaNet as one layer: the chunked and recurrent forms against each other and against transformers'
torch fallbacks; the layer against Qwen3.5's and Qwen3-Next's with the same weights; its closed forms
(parameters, FLOPs with FlopCounterMode, saved bytes with saved-tensor hooks) against the module."""
from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from engine.layers import delta_rule as rule
from engine.layers.attention import LayerKV
from engine.layers.gdn import (GatedDeltaNet, GDNDims, gdn_core_flops, gdn_matmul_params, gdn_params,
                               gdn_saved_bytes, gdn_state_shapes)
from engine.measure.flops import flop_counter
from tests.layer_checks import module_saved_bytes

qwen3_next = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def rule_inputs(B=2, T=37, nk=2, nv=4, dk=8, dv=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, T, nk, dk, generator=g), torch.randn(B, T, nk, dk, generator=g),
            torch.randn(B, T, nv, dv, generator=g), -2 * torch.rand(B, T, nv, generator=g),
            torch.rand(B, T, nv, generator=g), torch.randn(B, nv, dk, dv, generator=g))


def ours(q, k, v, g, beta):
    """transformers' layout [B, T, heads, dim] -> the kernels' [B, heads, T, dim], normalized as the layer does."""
    dk = q.shape[-1]
    return ((rule.l2_normalize(q) * dk ** -0.5).transpose(1, 2), rule.l2_normalize(k).transpose(1, 2),
            v.transpose(1, 2), g.transpose(1, 2), beta.transpose(1, 2))


@pytest.mark.parametrize("chunk, nk, initial", list(itertools.product((1, 5, 16, 64), (1, 2, 4), (False, True))))
def test_chunked_and_recurrent_equal_transformers_fallbacks(chunk, nk, initial):
    q, k, v, g, beta, s0 = rule_inputs(nk=nk)
    s0 = s0 if initial else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_o, ref_s = qwen3_next.torch_chunk_gated_delta_rule(
            q, k, v, g, beta, chunk_size=chunk, initial_state=s0, output_final_state=True,
            use_qk_l2norm_in_kernel=True)
        rec_o, rec_s = qwen3_next.torch_recurrent_gated_delta_rule(
            q, k, v, g, beta, initial_state=s0, output_final_state=True, use_qk_l2norm_in_kernel=True)
    o, s = rule.chunked(*ours(q, k, v, g, beta), chunk, s0, want_state=True)
    o_rec, s_rec = rule.recurrent(*ours(q, k, v, g, beta), s0)
    for a, b in ((o, ref_o), (s, ref_s), (o_rec, rec_o), (s_rec, rec_s), (o, o_rec), (s, s_rec)):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


def test_initial_state_matters_and_splitting_the_sequence_changes_nothing():
    """Running the first 20 tokens, then the rest from the state, equals one run over all of them."""
    args = ours(*rule_inputs()[:5])
    whole, s_whole = rule.chunked(*args, 8, want_state=True)
    first, s1 = rule.chunked(*(a[:, :, :20] for a in args), 8, want_state=True)
    rest, s2 = rule.chunked(*(a[:, :, 20:] for a in args), 8, s1, want_state=True)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s2, s_whole, atol=1e-5, rtol=1e-5)
    assert (rest - rule.chunked(*(a[:, :, 20:] for a in args), 8)[0]).abs().max() > 1e-3


def test_training_form_has_the_gradients_of_plain_autograd():
    def run(fn):
        torch.manual_seed(0)
        inputs = [t.clone().requires_grad_() for t in (*ours(*rule_inputs(T=13)[:5]), rule_inputs()[5])]
        o, s = fn(*inputs[:5], 4, inputs[5], True)
        (o.square().sum() + s.sin().sum()).backward()
        return [t.grad for t in inputs]
    for a, b in zip(run(rule.chunked), run(rule.chunked_train)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_solve_flops_is_a_hand_count_of_forward_substitution():
    """Count the multiply-adds of solving a unit lower-triangular system column by column."""
    for c, m in ((1, 3), (4, 2), (7, 5)):
        a = torch.randn(c, c).tril(-1) + torch.eye(c)
        b, x, madds = torch.randn(c, m), torch.zeros(c, m), 0
        for i in range(c):
            for col in range(m):
                total = b[i, col]
                for j in range(i):
                    total = total - a[i, j] * x[j, col]
                    madds += 1
                x[i, col] = total
        torch.testing.assert_close(x, torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True))
        assert rule.solve_flops(c, m) == 2 * madds


def pair(nk=2, nv=4, dk=8, dv=6, K=4, chunk=8, d=24, fused=False):
    """A transformers Gated DeltaNet layer with every weight redrawn, and ours holding the same weights."""
    from engine.interop.hf_models import scramble_
    cls = qwen3_next.Qwen3NextGatedDeltaNet
    if fused:
        from transformers import Qwen3NextConfig as Config
    else:
        from transformers import Qwen3_5TextConfig as Config
        from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet as cls
    hf = cls(Config(hidden_size=d, linear_num_key_heads=nk, linear_num_value_heads=nv, linear_key_head_dim=dk,
                    linear_value_head_dim=dv, linear_conv_kernel_dim=K, num_hidden_layers=1,
                    layer_types=["linear_attention"]), 0)
    scramble_(hf)
    dims = GDNDims(d, nk, nv, dk, dv, K, chunk)
    layer = GatedDeltaNet(dims)
    with torch.no_grad():
        if fused:   # Qwen3-Next: [q k v z] and [b a] grouped by key head
            r = nv // nk
            q, k, v, z = hf.in_proj_qkvz.weight.view(nk, 2 * dk + 2 * r * dv, d).split([dk, dk, r * dv, r * dv], 1)
            b, a = hf.in_proj_ba.weight.view(nk, 2 * r, d).split([r, r], dim=1)
            qkv = torch.cat([t.reshape(-1, d) for t in (q, k, v)])
            z, b, a = (t.reshape(-1, d) for t in (z, b, a))
        else:
            qkv, z, b, a = (hf.get_parameter(f"in_proj_{x}.weight") for x in ("qkv", "z", "b", "a"))
        for name, t in (("qkv", qkv), ("z", z), ("b", b), ("a", a)):
            layer.get_parameter(f"in_proj_{name}.weight").copy_(t)
        for name in ("conv1d.weight", "dt_bias", "A_log", "out_proj.weight"):
            layer.get_parameter(name).copy_(hf.get_parameter(name))
        layer.norm_weight.copy_(hf.norm.weight)
    return hf, layer


@pytest.mark.parametrize("fused, nk, K, T", [(False, 2, 4, 21), (True, 2, 4, 21), (False, 4, 2, 9),
                                             (True, 1, 3, 30), (False, 1, 1, 5)])
def test_layer_equals_transformers_layer(fused, nk, K, T):
    hf, layer = pair(nk=nk, K=K, fused=fused)
    x = torch.randn(2, T, 24, generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf(x)
    torch.testing.assert_close(layer(x), ref, atol=5e-5, rtol=1e-4)


@pytest.mark.parametrize("K, state_dtype", [(4, "fp32"), (1, "fp32"), (3, "bf16")])
def test_decode_with_the_state_equals_one_forward(K, state_dtype):
    layer = GatedDeltaNet(GDNDims(24, 2, 4, 8, 6, K, 4), DTYPES[state_dtype])
    layer.init_weights(0.2, 0.2, torch.Generator().manual_seed(0))
    x = torch.randn(2, 15, 24, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = layer(x)
        cache = LayerKV("fp8")
        steps = [layer(x[:, :6], cache=cache)] + [layer(x[:, t:t + 1], cache=cache) for t in range(6, 15)]
        cache2 = LayerKV("fp8")   # pieces of several tokens after the prompt start from the state too
        pieces = [layer(x[:, a:b], cache=cache2) for a, b in ((0, 6), (6, 8), (8, 9), (9, 12), (12, 15))]
        fresh = layer(x[:, 6:])
    tol = 1e-5 if state_dtype == "fp32" else 2e-2
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=tol, rtol=tol)
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole, atol=tol, rtol=tol)
    assert (fresh - whole[:, 6:]).abs().max() > 10 * tol   # the state carries the prompt: it matters here
    shapes = gdn_state_shapes(layer.dims, K - 1)
    assert cache.recurrent.shape[1:] == shapes["recurrent"] and cache.recurrent.dtype == DTYPES[state_dtype]
    assert (cache.conv is None) == (K == 1)
    if K > 1:
        assert cache.conv.shape[1:] == shapes["conv"]


@pytest.mark.parametrize("nk, nv, K", [(2, 4, 4), (1, 3, 1), (3, 3, 2)])
def test_params_and_matmul_params_equal_the_module(nk, nv, K):
    dims = GDNDims(24, nk, nv, 8, 6, K, 8)
    layer = GatedDeltaNet(dims).to("meta")
    p = gdn_params(dims)
    assert sum(p.values()) == sum(t.numel() for t in layer.parameters())
    in_proj = sum(layer.get_parameter(f"in_proj_{x}.weight").numel() for x in ("qkv", "z", "b", "a"))
    assert p["gdn_in_proj"] == in_proj and p["gdn_conv"] == layer.conv1d.weight.numel()
    assert p["gdn_out_proj"] == layer.out_proj.weight.numel()
    assert gdn_matmul_params(dims) == in_proj + layer.conv1d.weight.numel() + layer.out_proj.weight.numel()


@pytest.mark.parametrize("T, chunk, nk", list(itertools.product((1, 5, 8, 21), (4, 8, 64), (1, 2))))
def test_flops_equal_flop_counter(T, chunk, nk):
    dims = GDNDims(24, nk, 4, 8, 6, 4, chunk)
    layer = GatedDeltaNet(dims).to("meta")
    x = torch.randn(2, T, 24, device="meta", requires_grad=True)
    counter = flop_counter()
    with counter:
        y = layer(x)
        forward = counter.get_total_flops()
        y.sum().backward()
    assert forward == 2 * gdn_matmul_params(dims) * 2 * T + gdn_core_flops(dims, 2, T)
    backward = 2 * 2 * gdn_matmul_params(dims) * 2 * T \
        + 2 * dims.v_heads * rule.chunked_backward_flops(T, chunk, dims.k_dim, dims.v_dim)
    assert counter.get_total_flops() - forward == backward


def test_torch_counts_a_depthwise_conv_backward_once_per_channel_pair_and_we_correct_it():
    """torch's formula ignores groups in backward; ours counts each gradient as one forward's products, which
    is what C separate one-channel convolutions count with torch's own formula."""
    x, w = torch.randn(2, 6, 9, requires_grad=True), torch.randn(6, 1, 3, requires_grad=True)

    def count(counter, fn):
        with counter:
            fn().sum().backward()
        return counter.get_total_flops()
    grouped = lambda: torch.nn.functional.conv1d(x, w, groups=6)   # noqa: E731
    split = lambda: torch.cat([torch.nn.functional.conv1d(x[:, i:i + 1], w[i:i + 1]) for i in range(6)], 1)  # noqa
    ours_count, per_channel = count(flop_counter(), grouped), count(FlopCounterMode(display=False), split)
    assert ours_count == per_channel == 3 * 2 * 2 * 6 * 7 * 3
    assert count(FlopCounterMode(display=False), grouped) > per_channel


@pytest.mark.parametrize("T, K, dtype, nk, chunk", list(itertools.product((1, 8, 21), (1, 4), ("fp32", "bf16"),
                                                                          (1, 2), (8, 64))))
def test_saved_bytes_equal_saved_tensor_hooks(T, K, dtype, nk, chunk):
    dims = GDNDims(24, nk, 4, 8, 6, K, chunk)
    layer = GatedDeltaNet(dims).to(DTYPES[dtype])
    x = torch.randn(2, T, 24, dtype=DTYPES[dtype], requires_grad=True)
    assert sum(gdn_saved_bytes(dims, 2, T, x.element_size()).values()) == module_saved_bytes(layer, x)
