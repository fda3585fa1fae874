"""Lightning attention as one layer: the blockwise and recurrent forms against each other and against
transformers' MiniMaxLightningAttention with the same weights (its decay rates included); its closed forms
(parameters, FLOPs with FlopCounterMode, saved bytes with saved-tensor hooks) against the module."""
from __future__ import annotations

import itertools
import warnings

import pytest
import torch

from engine.layers.attention import LayerKV
from engine.layers.lightning import (LightningAttention, LightningDims, block_flops, chunked, lightning_core_flops,
                                     lightning_matmul_params, lightning_params, lightning_saved_bytes, recurrent,
                                     slope_rates)
from engine.measure.flops import flop_counter
from tests.layer_checks import module_saved_bytes

minimax = pytest.importorskip("transformers.models.minimax.modeling_minimax")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def pair(layer=1, n_layers=4, block=5, d=24, heads=4, dh=6):
    """transformers' lightning layer (layer `layer` of `n_layers`) with every weight redrawn, and ours holding the
    same weights; ours computes its decay rates itself."""
    from transformers import MiniMaxConfig

    from engine.interop.hf_models import scramble_
    config = MiniMaxConfig(hidden_size=d, num_attention_heads=heads, head_dim=dh, num_hidden_layers=n_layers,
                           block_size=block)
    hf = minimax.MiniMaxLightningAttention(config, layer)
    scramble_(hf)
    ours = LightningAttention(LightningDims(d, heads, dh, block, layer, n_layers))
    ours.init_weights(0.1, 0.1, torch.Generator().manual_seed(0))
    with torch.no_grad():
        for name in ("qkv_proj", "output_gate", "out_proj"):
            ours.get_parameter(f"{name}.weight").copy_(hf.get_parameter(f"{name}.weight"))
        ours.norm_weight.copy_(hf.norm.weight)
    return hf, ours


def test_decay_rates_are_minimax_slopes():
    """ALiBi's geometric slopes 2^(-8(h+1)/H), scaled by 1 - l/(L-1): the last layer hardly forgets."""
    for heads, layer, n in ((8, 0, 4), (4, 3, 4), (64, 7, 80)):
        hf, _ = pair(layer=layer, n_layers=n, heads=heads, dh=2, d=8)
        torch.testing.assert_close(slope_rates(heads, layer, n), hf.slope_rate.flatten(), rtol=0, atol=0)
    s = slope_rates(8, 0, 4)
    torch.testing.assert_close(s, torch.tensor([2.0 ** -(h + 1) for h in range(8)]) * (1 + 1e-5))
    assert slope_rates(8, 3, 4).max() < 1e-4


@pytest.mark.parametrize("layer, block, T", [(0, 5, 21), (2, 4, 9), (3, 256, 30), (1, 3, 3), (1, 1, 7)])
def test_layer_equals_transformers_layer(layer, block, T):
    hf, ours = pair(layer=layer, block=block)
    x = torch.randn(2, T, 24, generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf(x, None, None)[0]
    assert torch.equal(ours.slope, hf.slope_rate.flatten())
    torch.testing.assert_close(ours(x), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk, initial", list(itertools.product((1, 4, 7, 64), (False, True))))
def test_blocks_and_recurrence_equal_the_definition(chunk, initial):
    """S_t = lam S_{t-1} + k_t^T v_t, o_t = q_t S_t written out token by token with a per-head lam."""
    g = torch.Generator().manual_seed(2)
    B, H, T, dk, dv = 2, 3, 19, 4, 5
    q, k, v = (torch.randn(B, H, T, w, generator=g) for w in (dk, dk, dv))
    log_lam = -torch.tensor([0.05, 0.5, 2.0])
    s0 = torch.randn(B, H, dk, dv, generator=g) if initial else None
    S = s0.clone() if initial else torch.zeros(B, H, dk, dv)
    want = []
    for t in range(T):
        S = log_lam.exp()[:, None, None] * S + k[:, :, t, :, None] * v[:, :, t, None, :]
        want.append((q[:, :, t, :, None] * S).sum(-2))
    want = torch.stack(want, dim=1)                                   # [B, T, H, dv]
    o, s = chunked(q, k, v, log_lam, None, chunk, s0, want_state=True)
    o_rec, s_rec = recurrent(q, k, v, log_lam, s0)
    for a, b in ((o, want), (s, S), (o_rec, want), (s_rec, S)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layer, state_dtype", [(0, None), (2, torch.float32), (1, torch.bfloat16)])
def test_decode_with_the_state_equals_one_forward_and_transformers_cache(layer, state_dtype):
    hf, ours = pair(layer=layer, block=4)
    ours.state_dtype = state_dtype
    x = torch.randn(2, 13, 24, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = ours(x)
        cache = LayerKV("fp8")
        steps = [ours(x[:, :6], cache=cache)] + [ours(x[:, t:t + 1], cache=cache) for t in range(6, 13)]
        cache2 = LayerKV("fp8")   # pieces of several tokens after the prompt (chunked prefill) start from the state too
        pieces = [ours(x[:, a:b], cache=cache2) for a, b in ((0, 6), (6, 9), (9, 10), (10, 13))]
        hf_cache = minimax.MiniMaxCache()
        hf(x[:, :6], None, None, cache=hf_cache)
    tol = 2e-2 if state_dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=tol, rtol=tol)
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole, atol=tol, rtol=tol)
    assert cache.conv is None and cache.recurrent.shape == hf_cache.get_linear_cache(layer).shape == (2, 4, 6, 6)
    assert cache.recurrent.dtype == (state_dtype or torch.float32)


def test_params_and_matmul_params_equal_the_module():
    dims = LightningDims(24, 4, 6, 8)
    layer = LightningAttention(dims).to("meta")
    p = lightning_params(dims)
    assert sum(p.values()) == sum(t.numel() for t in layer.parameters())
    assert p["lightning_in_proj"] == layer.qkv_proj.weight.numel() + layer.output_gate.weight.numel()
    assert lightning_matmul_params(dims) == sum(m.weight.numel() for m in (layer.qkv_proj, layer.output_gate,
                                                                           layer.out_proj))


def test_block_flops_by_hand():
    """T = 10 in blocks of 4, dk = 3, dv = 5: blocks of 4, 4, 2; QK^T and its product with V per block, the
    state read by the 2nd and 3rd block and written after the 1st and 2nd."""
    blocks = 2 * (16 + 16 + 4) * (3 + 5)
    assert block_flops(10, 4, 3, 5) == blocks + 2 * (4 + 2) * 15 + 2 * (4 + 4) * 15
    assert block_flops(10, 4, 3, 5, initial=True, final=True) == blocks + 2 * 10 * 15 * 2


@pytest.mark.parametrize("T, chunk", list(itertools.product((1, 5, 8, 21), (4, 8, 64))))
def test_flops_equal_flop_counter(T, chunk):
    dims = LightningDims(24, 4, 6, chunk, 1, 4)
    layer = LightningAttention(dims).to("meta")
    x = torch.randn(2, T, 24, device="meta", requires_grad=True)
    counter = flop_counter()
    with counter:
        y = layer(x)
        forward = counter.get_total_flops()
        y.sum().backward()
    assert forward == 2 * lightning_matmul_params(dims) * 2 * T + lightning_core_flops(dims, 2, T)
    backward = 2 * 2 * lightning_matmul_params(dims) * 2 * T + 3 * lightning_core_flops(dims, 2, T)
    assert counter.get_total_flops() - forward == backward


@pytest.mark.parametrize("T, dtype, chunk", list(itertools.product((1, 8, 21), ("fp32", "bf16"), (4, 64))))
def test_saved_bytes_equal_saved_tensor_hooks(T, dtype, chunk):
    dims = LightningDims(24, 4, 6, chunk, 1, 4)
    layer = LightningAttention(dims).to(DTYPES[dtype])
    layer.init_weights(0.1, 0.1, torch.Generator().manual_seed(0))
    x = torch.randn(2, T, 24, dtype=DTYPES[dtype], requires_grad=True)
    assert sum(lightning_saved_bytes(dims, 2, T, x.element_size()).values()) == module_saved_bytes(layer, x)


def _all_lightning(**changes):
    from engine.config import ModelConfig
    from tests.hybrid_cases import HYBRID_BASE
    return ModelConfig(**{**HYBRID_BASE, "n_layers": 3, "layer_types": ("lightning",) * 3, **changes})


def test_a_built_model_decays_each_layer_as_minimax_does():
    """A model built from its config (not imported) computes every layer's rates from that layer's depth, as
    transformers' MiniMaxLightningAttention(config, layer) does: the first layer forgets fastest."""
    from transformers import MiniMaxConfig

    from engine.model import build_model
    cfg = _all_lightning()
    hf = MiniMaxConfig(hidden_size=cfg.d_model, num_attention_heads=cfg.n_heads, head_dim=cfg.head_width,
                       num_hidden_layers=cfg.n_layers, block_size=cfg.gdn_chunk)
    model = build_model(cfg)
    for layer, block in enumerate(model.blocks):
        assert torch.equal(block.lightning.slope, minimax.MiniMaxLightningAttention(hf, layer).slope_rate.flatten())
    assert model.blocks[0].lightning.slope.min() > model.blocks[2].lightning.slope.max()


@pytest.mark.parametrize("heads, head_dim", [(4, 4), (2, 6)])
def test_a_decode_step_costs_four_state_products_per_head_whatever_the_context(heads, head_dim):
    """One lightning decode step per head: write k^T v into the dh x dh state and read it with q, 2 FLOPs a
    multiply-add, so 4 dh^2 (the decay is elementwise), on top of 2 FLOPs per weight; the fixed state does not
    grow with the context (3 layers, 2 sequences)."""
    from engine.budget.flops import decode_flops, matmul_params
    cfg = _all_lightning(n_heads=heads, head_dim=head_dim)
    step = 2 * 2 * matmul_params(cfg) + 3 * 2 * heads * 4 * head_dim * head_dim
    assert [decode_flops(cfg, 2, context) for context in (1, 100, 10_000)] == [step] * 3
