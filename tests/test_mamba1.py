"""Mamba-1 mixer (engine/layers/mamba1.py): outputs and gradients == transformers' JambaMambaMixer and MambaMixer
torch paths with the same (redrawn) weights; the chunked selective scan == the recurrence == prefill + decode;
closed forms (params, saved bytes, FLOPs, state bytes) == the module, FlopCounterMode, a hand count and
transformers' cache."""
import pytest
import torch

from engine.budget.memory import state_bytes
from engine.config import ModelConfig
from engine.layers.attention import LayerKV
from engine.layers.mamba1 import (Mamba1, Mamba1Dims, mamba1_backward_flops, mamba1_decode_flops, mamba1_params,
                                  mamba1_prefill_flops, selective_scan, selective_step)
from tests.layer_checks import assert_same_layer, hand_counted_flops, meta_flops, module_saved_bytes, redrawn

transformers = pytest.importorskip("transformers", minversion="5.0")
transformers.logging.set_verbosity_error()

D_MODEL, T = 16, 13
JAMBA_NAMES = {"dt_layernorm": "dt_norm", "b_layernorm": "b_norm", "c_layernorm": "c_norm"}


def _renamed(name: str) -> str:
    """Jamba's name for a mixer tensor -> ours (its dt/B/C norms are *_layernorm)."""
    head, dot, rest = name.partition(".")
    return JAMBA_NAMES.get(head, head) + dot + rest


def _pair(family: str, chunk: int):
    """transformers' mixer (jamba: norms on dt, B, C; mamba: none), redrawn, and ours with its weights."""
    from transformers import JambaConfig, MambaConfig
    from transformers.models.jamba.modeling_jamba import JambaMambaMixer
    from transformers.models.mamba.modeling_mamba import MambaMixer
    if family == "jamba":
        cfg = JambaConfig(hidden_size=D_MODEL, mamba_d_state=6, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=3,
                          num_hidden_layers=1, rms_norm_eps=1e-6, mamba_proj_bias=True)
        hf, dims = JambaMambaMixer(cfg, 0), Mamba1Dims(D_MODEL, 32, 6, 3, 4, True, True, True, 1e-6, chunk)
    else:
        cfg = MambaConfig(hidden_size=D_MODEL, state_size=5, conv_kernel=3, expand=3, time_step_rank=4,
                          num_hidden_layers=1, use_conv_bias=False)
        hf, dims = MambaMixer(cfg, 0), Mamba1Dims(D_MODEL, 48, 5, 4, 3, False, False, False, chunk=chunk)
    hf = redrawn(hf, seed=chunk)
    ours = Mamba1(dims)
    sd = {_renamed(k): v for k, v in hf.state_dict().items()}
    ours.load_state_dict(sd)
    return hf, ours


@pytest.mark.parametrize("family,chunk", [("jamba", 4), ("jamba", 64), ("mamba", 5)])
def test_output_and_gradients_equal_transformers_slow_path(family, chunk):
    hf, ours = _pair(family, chunk)
    x = torch.randn(2, T, D_MODEL, generator=torch.Generator().manual_seed(1))
    assert_same_layer(hf, ours, x, _renamed)


@pytest.mark.parametrize("family", ["jamba", "mamba"])
def test_decoding_with_the_state_equals_the_full_forward(family):
    _, ours = _pair(family, 4)
    x = torch.randn(2, T, D_MODEL, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = ours(x)
        state = LayerKV("fp8")
        stepped = torch.cat([ours(x[:, t:t + 1], cache=state) for t in range(T)], 1)
        state2 = LayerKV("fp8")
        split = torch.cat([ours(x[:, :6], cache=state2)] + [ours(x[:, t:t + 1], cache=state2) for t in range(6, T)], 1)
        state3 = LayerKV("fp8")   # pieces of several tokens after the prompt (chunked prefill) start from the state too
        pieces = torch.cat([ours(x[:, a:b], cache=state3) for a, b in ((0, 6), (6, 8), (8, 9), (9, T))], 1)
        fresh = ours(x[:, 6:])
    tol = dict(rtol=0, atol=2e-5 * full.abs().max().item())
    torch.testing.assert_close(stepped, full, **tol)
    torch.testing.assert_close(split, full, **tol)
    torch.testing.assert_close(pieces, full, **tol)
    torch.testing.assert_close(state.recurrent, state2.recurrent, rtol=1e-4, atol=1e-5)
    assert (fresh - full[:, 6:]).abs().max() > 100 * tol["atol"]   # the state carries the prompt: it matters here


def test_chunked_scan_equals_the_recurrence_for_every_chunk_size_and_a_starting_state():
    g = torch.Generator().manual_seed(3)
    b, D, N = 2, 7, 5
    x, dt = torch.randn(b, T, D, generator=g), torch.rand(b, T, D, generator=g)
    B, C = torch.randn(b, T, N, generator=g), torch.randn(b, T, N, generator=g)
    A, h0 = -torch.rand(D, N, generator=g) * 3, torch.randn(b, D, N, generator=g)
    h, ys = h0, []
    for t in range(T):
        y, h = selective_step(h, x[:, t], dt[:, t], A, B[:, t], C[:, t])
        ys.append(y)
    for chunk in (1, 4, 5, T, 32, None):
        y, final = selective_scan(x, dt, A, B, C, chunk, h0)
        torch.testing.assert_close(y, torch.stack(ys, 1), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(final, h, rtol=1e-5, atol=1e-5)


DIMS = [Mamba1Dims(16, 32, 6, 3, 4, True, True, True, chunk=4), Mamba1Dims(12, 24, 4, 2, 2, False, False)]


@pytest.mark.parametrize("dims", DIMS)
def test_params_closed_form_equals_the_module(dims):
    assert sum(mamba1_params(dims).values()) == sum(p.numel() for p in Mamba1(dims).parameters())
    # by hand for the first: in_proj 16*64 + 64, conv 32*4 + 32, x_proj 32*(3 + 12), dt_proj 3*32 + 32,
    # A_log 32*6, D 32, norms 3 + 6 + 6, out_proj 32*16 + 16
    assert sum(mamba1_params(DIMS[0]).values()) == (16 * 64 + 64 + 32 * 5 + 32 * 15 + 3 * 32 + 32 + 32 * 6 + 32
                                                     + 15 + 32 * 16 + 16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dims", DIMS)
def test_saved_bytes_are_in_proj_output_and_out_proj_input(dims, dtype):
    m = redrawn(Mamba1(dims), 0).to(dtype)
    x = torch.randn(3, T, dims.d_model, dtype=dtype, requires_grad=True)
    assert module_saved_bytes(m, x) == 3 * T * 3 * dims.d_inner * x.element_size()


@pytest.mark.parametrize("seq", [5, 13])
@pytest.mark.parametrize("dims", DIMS)
def test_prefill_and_backward_flops_equal_flop_counter(dims, seq):
    """Forward and backward == FlopCounterMode (engine/measure/flops.py's counter)."""
    forward, backward = meta_flops(Mamba1(dims), 2, seq)
    assert (forward, backward) == (mamba1_prefill_flops(dims, 2, seq), mamba1_backward_flops(dims, 2, seq))


def test_decode_flops_scan_term_is_seven_d_inner_n_by_hand_count():
    dims = DIMS[0]
    D, N = 32, 6
    g = torch.Generator().manual_seed(4)
    args = (torch.randn(1, D, N, generator=g), torch.randn(1, D, generator=g), torch.rand(1, D, generator=g),
            -torch.rand(D, N, generator=g), torch.randn(1, N, generator=g), torch.randn(1, N, generator=g))
    assert hand_counted_flops(selective_step, *args) == mamba1_decode_flops(dims) == 7 * 32 * 6 + 32


def _jamba_like(**changes) -> ModelConfig:
    """The Jamba model below as our config: a Mamba-1 layer (inner 32, state 6, dt rank 3) then attention, MoE."""
    return ModelConfig(**{**dict(name="jamba-like", vocab_size=50, d_model=D_MODEL, n_layers=2, n_heads=4,
                                 n_kv_heads=2, layer_types=("mamba1", "full"), ffn_types=("dense", "moe"),
                                 n_experts=4, ssm_inner=32, ssm_state=6, ssm_dt_rank=3, ssm_dt_norm=True,
                                 norm="rmsnorm", ffn="swiglu", d_ff=24, position="none", bias=False), **changes})


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_state_bytes_equal_transformers_cache_tensors(dtype):
    """transformers keeps K conv positions in the model dtype and an fp32 recurrent state, on a Jamba model:
    engine.budget.memory.state_bytes, transformers' convention, == the bytes of its cache tensors."""
    from transformers import JambaConfig, JambaForCausalLM
    cfg = JambaConfig(vocab_size=50, hidden_size=D_MODEL, intermediate_size=24, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, mamba_d_state=6, mamba_d_conv=4, mamba_expand=2,
                      mamba_dt_rank=3, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                      expert_layer_offset=1, num_experts=4, num_experts_per_tok=2)
    hf = JambaForCausalLM(cfg).to(torch.float32 if dtype == "fp32" else torch.bfloat16).eval()
    with torch.no_grad():
        cache = hf(torch.randint(0, 50, (3, 7)), use_cache=True).past_key_values
    layer = cache.layers[0]
    measured = {"conv": layer.conv_states[0].nbytes, "recurrent": layer.recurrent_states[0].nbytes}
    assert measured == state_bytes(_jamba_like(), 3, dtype, "transformers")


def test_state_conventions_by_their_sources_shapes():
    """vLLM mamba1_state_shape: conv (K-1) x d_inner, temporal (d_inner, N); llama.cpp n_embd_r (K-1)*d_inner
    (no groups), n_embd_s N*d_inner, both f32. Jamba-v0.1's mixer: d_inner 8192, N 16, K 4."""
    cfg = _jamba_like(d_model=4096, n_layers=1, n_heads=32, n_kv_heads=8, layer_types=("mamba1",),
                      ffn_types=("dense",), ssm_inner=8192, ssm_state=16, ssm_dt_rank=256)
    assert state_bytes(cfg, 1, "bf16", "vllm") == {"conv": 3 * 8192 * 2, "recurrent": 8192 * 16 * 2}
    assert state_bytes(cfg, 1, "bf16", "llama.cpp") == {"conv": 3 * 8192 * 4, "recurrent": 8192 * 16 * 4}
    assert state_bytes(cfg, 1, "bf16", "transformers") == {"conv": 4 * 8192 * 2, "recurrent": 8192 * 16 * 4}
