"""gpt-oss's two layer features against independent references: attention sinks (a few-line float64 softmax
with one extra logit per head) and the clamped SwiGLU (the same formula by hand, and transformers' own
GptOssExperts gate on its interleaved gate/up columns)."""
import math

import pytest
import torch

from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.layers.attention import Attention
from engine.layers.ffn import ClampedSwiGLU
from engine.model import build_model

TINY = dict(vocab_size=11, context_length=8, d_model=12, n_layers=2, n_heads=4, position="none")


def _sink_reference(x, attn: Attention, window: int | None) -> torch.Tensor:
    """softmax over [scores of the visible keys, s_h], the sink's share dropped, then the values: by hand."""
    B, T, _ = x.shape
    H, Hkv, hd = attn.n_heads, attn.kv_heads, attn.hd
    q = (x @ attn.q_proj.weight.T + attn.q_proj.bias).view(B, T, H, hd)
    k = (x @ attn.k_proj.weight.T + attn.k_proj.bias).view(B, T, Hkv, hd)
    v = (x @ attn.v_proj.weight.T + attn.v_proj.bias).view(B, T, Hkv, hd)
    out = torch.zeros(B, T, H, hd, dtype=x.dtype)
    for b in range(B):
        for h in range(H):
            g = h // (H // Hkv)
            for i in range(T):
                keys = [j for j in range(i + 1) if window is None or i - j < window]
                z = torch.stack([q[b, i, h] @ k[b, j, g] / math.sqrt(hd) for j in keys])
                w = torch.exp(z) / (torch.exp(attn.sinks[h]) + torch.exp(z).sum())
                out[b, i, h] = sum(w[n] * v[b, j, g] for n, j in enumerate(keys))
    return out.reshape(B, T, H * hd) @ attn.o_proj.weight.T + attn.o_proj.bias


@pytest.mark.parametrize("kv,window", [(None, None), (2, None), (1, 3)])
def test_sinks_are_an_extra_softmax_logit_with_no_value(kv, window):
    cfg = ModelConfig(**TINY, n_kv_heads=kv, attn_sinks=True, bias=True)
    torch.manual_seed(0)
    attn = Attention(cfg, window).double()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_()
    x = torch.randn(2, 6, cfg.d_model, dtype=torch.float64)
    pos = torch.arange(6)
    want = _sink_reference(x, attn, window)
    for explicit in (False, True):   # sinks always take the explicit kernel
        attn.explicit = explicit
        assert torch.allclose(attn(x, pos, None), want, atol=1e-12, rtol=0)


def test_a_large_sink_makes_a_head_attend_to_nothing():
    """All probability goes to the sink: the head adds only o_proj's bias; a very negative sink changes nothing."""
    cfg = ModelConfig(**TINY, attn_sinks=True, bias=True)
    attn = Attention(cfg, None).double()
    plain = Attention(cfg.replace(attn_sinks=False), None).double()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_()
        plain.load_state_dict({k: v for k, v in attn.state_dict().items() if k != "sinks"})
        x, pos = torch.randn(1, 5, cfg.d_model, dtype=torch.float64), torch.arange(5)
        attn.sinks.fill_(1e4)
        assert torch.allclose(attn(x, pos, None), attn.o_proj.bias.expand(1, 5, -1), atol=1e-12)
        attn.sinks.fill_(-1e4)
        assert torch.allclose(attn(x, pos, None), plain(x, pos, None), atol=1e-12)


def test_sinks_add_one_parameter_per_head_per_layer():
    cfg = ModelConfig(**TINY, attn_sinks=True)
    count = count_params(cfg)
    assert count.components["attention_sinks"] == cfg.n_layers * cfg.n_heads
    assert count.total == count_params(cfg.replace(attn_sinks=False)).total + cfg.n_layers * cfg.n_heads
    assert count.total == sum(p.numel() for p in build_model(cfg).parameters())


def test_clamped_swiglu_is_the_formula():
    g = torch.tensor([-20.0, -1.0, 0.0, 0.5, 6.9, 7.0, 20.0], dtype=torch.float64)
    u = torch.tensor([20.0, -20.0, 3.0, -0.5, 1.0, -7.5, 0.0], dtype=torch.float64)
    limit, alpha = 7.0, 1.702
    want = []
    for gi, ui in zip(g.tolist(), u.tolist()):
        gc, uc = min(gi, limit), max(-limit, min(ui, limit))      # the gate is clipped from above only
        want.append(gc / (1 + math.exp(-alpha * gc)) * (uc + 1))
    assert ClampedSwiGLU(limit, alpha)(g, u).tolist() == pytest.approx(want, rel=1e-15, abs=1e-300)


def test_clamped_swiglu_is_transformers_gpt_oss_gate():
    """transformers keeps gate and up interleaved in one [.., 2f] tensor: gate = [::2], up = [1::2]."""
    transformers = pytest.importorskip("transformers", minversion="5.0")
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts

    hf_cfg = transformers.GptOssConfig(hidden_size=8, intermediate_size=16, num_local_experts=2,
                                       swiglu_limit=5.0, swiglu_alpha=1.5)
    gate_up = torch.randn(32, 32, generator=torch.Generator().manual_seed(0)) * 8   # well past the limit
    want = GptOssExperts(hf_cfg)._apply_gate(gate_up)
    assert torch.equal(ClampedSwiGLU(5.0, 1.5)(gate_up[:, ::2], gate_up[:, 1::2]), want)
