"""One unit test per convention a converter can get subtly wrong: window edges, RoPE pairing and partial
rotary, Gemma's (1 + w) norm and embedding scale, GPT-2's Conv1D layout and tanh GELU, the fused qkv
layouts of NeoX and Falcon, Qwen2's q/k/v-only biases and Qwen3's per-head QK-norm."""
import math

import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.interop import (from_transformers, hf_model_from_config, rope_half_to_interleaved,  # noqa: E402
                            rope_interleaved_to_half, scramble_)
from engine.layers.ffn import ACTIVATIONS  # noqa: E402
from engine.layers.position import apply_rope, rope_tables  # noqa: E402

transformers.logging.set_verbosity_error()
_IDS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None, max_position_embeddings=64)
_TINY = dict(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4,
             num_key_value_heads=2, **_IDS)


def _pair(model_type, seed=0, **config):
    hf = hf_model_from_config(model_type, config, attn_implementation="eager").eval()
    scramble_(hf, seed=seed)
    return hf, from_transformers(hf)


@pytest.mark.parametrize("model_type,config", [
    ("mistral", dict(_TINY, sliding_window=4)),
    ("gemma2", dict(_TINY, head_dim=8, query_pre_attn_scalar=8, sliding_window=4, layer_types=["sliding_attention"],
                    attn_logit_softcapping=None, final_logit_softcapping=None)),
])
def test_window_edge_query_sees_exactly_the_last_w_positions(model_type, config):
    """One layer, window w: logits at t depend on tokens t-w+1 .. t and not on token t-w, in HF and in ours."""
    hf, ours = _pair(model_type, **config)
    w, t = 4, 10
    idx = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(0))

    def logits_at_t(changed_pos):
        x = idx.clone()
        x[0, changed_pos] = (x[0, changed_pos] + 1) % 50
        with torch.no_grad():
            return hf(input_ids=x).logits[0, t], ours(x)[0, t]

    with torch.no_grad():
        base_hf, base_ours = hf(input_ids=idx).logits[0, t], ours(idx)[0, t]
    outside_hf, outside_ours = logits_at_t(t - w)
    inside_hf, inside_ours = logits_at_t(t - w + 1)
    assert torch.equal(outside_hf, base_hf) and torch.allclose(outside_ours, base_ours, atol=1e-6)
    assert (inside_hf - base_hf).abs().max() > 1e-3 and (inside_ours - base_ours).abs().max() > 1e-3
    torch.testing.assert_close(inside_ours, inside_hf, rtol=1e-5, atol=1e-5)


def _rope_interleaved(x, positions, base=10000.0):
    """The interleaved convention (Meta's original Llama): dims (2i, 2i+1) form one complex number."""
    hd = x.shape[-1]
    freqs = 1.0 / base ** (torch.arange(0, hd, 2).float() / hd)
    rot = torch.polar(torch.ones(len(positions), hd // 2), positions.float()[:, None] * freqs)
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], hd // 2, 2).contiguous())
    return torch.view_as_real(z * rot).reshape(x.shape)


def test_rope_interleaved_weights_reordered_for_rotate_half_give_the_same_scores():
    g = torch.Generator().manual_seed(0)
    heads, hd, d, T = 2, 8, 16, 6
    wq, wk = torch.randn(heads * hd, d, generator=g), torch.randn(heads * hd, d, generator=g)
    x = torch.randn(T, d, generator=g)
    pos = torch.arange(T)

    def heads_of(y):   # [T, H*hd] -> [H, T, hd]
        return y.reshape(T, heads, hd).transpose(0, 1)

    q_i, k_i = _rope_interleaved(heads_of(x @ wq.T), pos), _rope_interleaved(heads_of(x @ wk.T), pos)
    cos, sin = rope_tables(pos, hd, 10000.0)
    q_h = apply_rope(heads_of(x @ rope_interleaved_to_half(wq, heads).T), cos, sin)
    k_h = apply_rope(heads_of(x @ rope_interleaved_to_half(wk, heads).T), cos, sin)
    torch.testing.assert_close(q_h @ k_h.transpose(-1, -2), q_i @ k_i.transpose(-1, -2), rtol=1e-5, atol=1e-5)
    naive = apply_rope(heads_of(x @ wq.T), cos, sin) @ apply_rope(heads_of(x @ wk.T), cos, sin).transpose(-1, -2)
    assert (naive - q_i @ k_i.transpose(-1, -2)).abs().max() > 1e-2   # the pairing convention matters
    for w in (wq, torch.randn(heads * hd, generator=g)):
        assert torch.equal(rope_half_to_interleaved(rope_interleaved_to_half(w, heads), heads), w)
    partial = rope_interleaved_to_half(wq, heads, rotary_dim=4).reshape(heads, hd, d)
    assert torch.equal(partial[:, 4:], wq.reshape(heads, hd, d)[:, 4:])   # non-rotary dims stay in place


def test_partial_rotary_matches_neox():
    from transformers.models.gpt_neox import modeling_gpt_neox as neox
    hf, ours = _pair("gpt_neox", vocab_size=50, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                     num_attention_heads=4, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                            "partial_rotary_factor": 0.25}, **_IDS)
    assert ours.cfg.rotary_dim == 4 and ours.cfg.head_width == 16
    q, k = torch.randn(1, 4, 9, 16), torch.randn(1, 4, 9, 16)
    pos = torch.arange(9)
    cos_hf, sin_hf = hf.gpt_neox.rotary_emb(q, pos[None])
    cos, sin = rope_tables(pos, ours.cfg.rotary_dim, ours.cfg.rope_base)
    torch.testing.assert_close(cos, cos_hf[0], rtol=0, atol=1e-6)
    q_hf, k_hf = neox.apply_rotary_pos_emb(q, k, cos_hf, sin_hf)
    torch.testing.assert_close(apply_rope(q, cos, sin), q_hf, rtol=0, atol=1e-6)
    assert torch.equal(apply_rope(k, cos, sin)[..., 4:], k[..., 4:])


def test_gemma_norm_is_one_plus_weight_and_embeddings_scale_by_sqrt_d():
    hf, ours = _pair("gemma", **dict(_TINY, head_dim=8))
    hf_norm, our_norm = hf.model.layers[0].input_layernorm, ours.blocks[0].norm1
    assert torch.equal(our_norm.weight, hf_norm.weight + 1)
    x = torch.randn(3, 32)
    torch.testing.assert_close(our_norm(x), hf_norm(x), rtol=1e-6, atol=1e-6)
    idx = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(ours.tok_emb(idx) * math.sqrt(32), hf.model.embed_tokens(idx), rtol=1e-6, atol=0)


def test_gpt2_conv1d_layout_and_fused_c_attn():
    hf, ours = _pair("gpt2", vocab_size=50, n_embd=32, n_layer=1, n_head=4, n_positions=16, bos_token_id=None,
                     eos_token_id=None)
    h, b = hf.transformer.h[0], ours.blocks[0]
    assert h.mlp.c_fc.weight.shape == (32, 128) and b.ffn.up.weight.shape == (128, 32)   # [in, out] vs [out, in]
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(b.ffn.up(x), h.mlp.c_fc(x), rtol=1e-6, atol=1e-6)
    q, k, v = h.attn.c_attn(x).split(32, dim=-1)
    for ours_proj, ref in ((b.attn.q_proj, q), (b.attn.k_proj, k), (b.attn.v_proj, v)):
        torch.testing.assert_close(ours_proj(x), ref, rtol=1e-6, atol=1e-6)


def test_gpt2_gelu_new_is_our_tanh_gelu():
    from transformers.activations import ACT2FN
    x = torch.linspace(-6, 6, 1001)
    torch.testing.assert_close(ACTIVATIONS["gelu_tanh"](x), ACT2FN["gelu_new"](x), rtol=1e-6, atol=1e-6)
    assert (ACTIVATIONS["gelu"](x) - ACT2FN["gelu_new"](x)).abs().max() > 1e-4   # exact GELU would be wrong


@pytest.mark.parametrize("model_type,config,layout", [
    ("gpt_neox", dict(hidden_size=32, intermediate_size=32, num_attention_heads=4), (4, 3)),  # [heads, 3, hd]
    ("falcon", dict(hidden_size=32, num_attention_heads=4), (1, 6)),                        # MQA: [q q q q k v]
    ("falcon", dict(hidden_size=32, num_attention_heads=4, num_kv_heads=2, new_decoder_architecture=True),
     (2, 4)),                                                                               # [kv, group + 2, hd]
])
def test_fused_qkv_layouts(model_type, config, layout):
    hf, ours = _pair(model_type, vocab_size=50, num_hidden_layers=1, **config, **_IDS)
    fused = (hf.gpt_neox.layers[0].attention if model_type == "gpt_neox" else hf.transformer.h[0].self_attention)
    a = ours.blocks[0].attn
    x = torch.randn(2, 5, 32)
    groups, per_group = layout
    y = fused.query_key_value(x).reshape(2, 5, groups, per_group, 8)
    q, k, v = y[..., :-2, :].reshape(2, 5, -1), y[..., -2, :].reshape(2, 5, -1), y[..., -1, :].reshape(2, 5, -1)
    for ours_proj, ref in ((a.q_proj, q), (a.k_proj, k), (a.v_proj, v)):
        torch.testing.assert_close(ours_proj(x), ref, rtol=1e-6, atol=1e-6)


def test_neox_two_norms_falcon_one_shared_norm():
    _, neox = _pair("gpt_neox", vocab_size=50, hidden_size=32, intermediate_size=32, num_hidden_layers=1,
                    num_attention_heads=4, **_IDS)
    hf, falcon = _pair("falcon", vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, **_IDS)
    assert neox.cfg.block == falcon.cfg.block == "parallel"
    n1, n2 = neox.blocks[0].norm1, neox.blocks[0].norm2
    assert n2 is not None and not torch.equal(n1.weight, n2.weight)
    assert falcon.blocks[0].norm2 is None and falcon.cfg.kv_heads == 1
    assert not hasattr(hf.transformer.h[0], "ln_mlp")


def test_qwen2_biases_on_qkv_only_and_qwen3_norms_each_head():
    hf, qwen2 = _pair("qwen2", **_TINY)
    a = qwen2.blocks[0].attn
    assert all(p.bias is not None for p in (a.q_proj, a.k_proj, a.v_proj))
    assert a.o_proj.bias is None and qwen2.blocks[0].ffn.up.bias is None and qwen2.blocks[0].ffn.down.bias is None
    assert hf.model.layers[0].self_attn.o_proj.bias is None
    hf3, qwen3 = _pair("qwen3", **dict(_TINY, head_dim=16))
    hf_attn, a3 = hf3.model.layers[0].self_attn, qwen3.blocks[0].attn
    assert a3.q_norm.weight.shape == hf_attn.q_norm.weight.shape == (16,)
    q = torch.randn(2, 4, 5, 16)   # [B, heads, T, head_dim]: one gain vector shared by every head
    torch.testing.assert_close(a3.q_norm(q), hf_attn.q_norm(q), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(a3.k_norm(q), hf_attn.k_norm(q), rtol=1e-6, atol=1e-6)


def test_an_imported_bf16_model_stays_bf16_in_eval_mode():
    """from_transformers keeps the source's dtype (a bf16 checkpoint built as fp32 would double its memory and
    change every logit's rounding) and its train/eval mode."""
    hf = hf_model_from_config("llama", dict(_TINY)).to(torch.bfloat16).eval()
    ours = from_transformers(hf)
    assert {p.dtype for p in ours.parameters()} == {torch.bfloat16} and not ours.training
