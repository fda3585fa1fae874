"""Mamba-2 mixer (engine/layers/mamba2.py): outputs and gradients == transformers' torch fallbacks of Mamba-2 and
of the four hybrid families with the same (redrawn) weights; chunked == recurrent == prefill + decode; closed forms
(params, saved bytes, FLOPs, state bytes) == the module, FlopCounterMode, a hand count and transformers' cache."""
import math

import pytest
import torch

from engine.budget.memory import state_bytes
from engine.config import ModelConfig
from engine.layers.attention import LayerKV
from engine.layers.mamba2 import (Mamba2, Mamba2Dims, mamba2_backward_flops, mamba2_decode_flops, mamba2_matmul_params,
                                  mamba2_params, mamba2_prefill_flops)
from engine.layers.ssd import ssd_chunked, ssd_step
from tests.layer_checks import assert_same_layer, hand_counted_flops, meta_flops, module_saved_bytes, redrawn

transformers = pytest.importorskip("transformers", minversion="5.0")
transformers.logging.set_verbosity_error()

D_MODEL, T = 32, 13
COMMON = dict(hidden_size=D_MODEL, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=16)


def _hf_mixer(family: str, H: int, P: int, N: int, G: int, Q: int, **extra):
    """transformers' Mamba-2 mixer of one family, and the dims that describe it."""
    from transformers import BambaConfig, FalconH1Config, GraniteMoeHybridConfig, Mamba2Config, NemotronHConfig
    from transformers.models.bamba.modeling_bamba import BambaMixer
    from transformers.models.falcon_h1.modeling_falcon_h1 import FalconH1Mixer, compute_mup_vector
    from transformers.models.granitemoehybrid.modeling_granitemoehybrid import GraniteMoeHybridMambaLayer
    from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer
    hybrid = dict(COMMON, mamba_n_heads=H, mamba_d_head=P, mamba_d_state=N, mamba_n_groups=G, mamba_chunk_size=Q)
    dims = Mamba2Dims(D_MODEL, H, P, N, G, 4, Q, norm_eps=1e-5)
    if family == "mamba2":
        cfg = Mamba2Config(hidden_size=D_MODEL, num_heads=H, head_dim=P, state_size=N, n_groups=G, chunk_size=Q,
                           expand=H * P // D_MODEL, num_hidden_layers=1, use_bias=True, layer_norm_epsilon=1e-5)
        return Mamba2Mixer(cfg, 0), Mamba2Dims(D_MODEL, H, P, N, G, 4, Q, proj_bias=True, norm_eps=1e-5)
    if family == "bamba":
        cfg = BambaConfig(**hybrid, mamba_expand=H * P // D_MODEL, attn_layer_indices=[], rms_norm_eps=1e-5)
        return BambaMixer(cfg, 0), dims
    if family == "granitemoehybrid":
        cfg = GraniteMoeHybridConfig(**hybrid, mamba_expand=H * P // D_MODEL, layer_types=["mamba"],
                                     rms_norm_eps=1e-5, mamba_conv_bias=False)
        return GraniteMoeHybridMambaLayer(cfg, 0), Mamba2Dims(D_MODEL, H, P, N, G, 4, Q, conv_bias=False,
                                                              norm_eps=1e-5)
    if family == "nemotron_h":   # the chunked form clamps dt from below at time_step_min
        cfg = NemotronHConfig(**COMMON, mamba_num_heads=H, mamba_head_dim=P, ssm_state_size=N, n_groups=G,
                              chunk_size=Q, layers_block_type=["mamba"], time_step_min=0.05, layer_norm_epsilon=1e-5)
        return NemotronHMamba2Mixer(cfg, 0), Mamba2Dims(D_MODEL, H, P, N, G, 4, Q, norm_eps=1e-5, dt_min=0.05)
    cfg = FalconH1Config(**hybrid, mamba_d_ssm=H * P, rms_norm_eps=1e-5, **extra)
    hf = FalconH1Mixer(cfg, 0)
    hf.register_buffer("mup_vector", compute_mup_vector(cfg), persistent=False)
    gate = ("gate" if not cfg.mamba_rms_norm else "gate_normed" if cfg.mamba_norm_before_gate else "norm_gated")
    return hf, Mamba2Dims(D_MODEL, H, P, N, G, 4, Q, gate=gate, norm_eps=1e-5, in_scale=cfg.ssm_in_multiplier,
                          proj_scales=tuple(cfg.ssm_multipliers))


FALCON = dict(ssm_multipliers=[0.5, 1.5, 2.0, 0.25, 3.0], ssm_in_multiplier=0.7)
CASES = {"mamba2": ("mamba2", 8, 8, 6, 2, 5, {}), "bamba": ("bamba", 8, 8, 6, 1, 4, {}),
         "granite-groups": ("granitemoehybrid", 4, 16, 8, 4, 16, {}),
         "nemotron_h": ("nemotron_h", 8, 8, 6, 2, 5, {}),
         "falcon-norm-gated": ("falcon_h1", 8, 8, 6, 2, 5, dict(FALCON, mamba_rms_norm=True,
                                                                 mamba_norm_before_gate=False)),
         "falcon-gate-normed": ("falcon_h1", 8, 8, 6, 2, 5, dict(FALCON, mamba_rms_norm=True,
                                                                  mamba_norm_before_gate=True)),
         "falcon-gate-only": ("falcon_h1", 8, 8, 6, 2, 5, dict(FALCON, mamba_rms_norm=False))}


def _pair(case: str):
    family, H, P, N, G, Q, extra = CASES[case]
    hf, dims = _hf_mixer(family, H, P, N, G, Q, **extra)
    hf = redrawn(hf, seed=len(case))
    ours = Mamba2(dims)
    ours.load_state_dict(hf.state_dict())
    return hf, ours


@pytest.mark.parametrize("case", CASES)
def test_output_and_gradients_equal_transformers_torch_fallback(case):
    hf, ours = _pair(case)
    assert_same_layer(hf, ours, torch.randn(2, T, D_MODEL, generator=torch.Generator().manual_seed(1)))


@pytest.mark.parametrize("case", ["mamba2", "nemotron_h", "falcon-gate-only"])
def test_decoding_with_the_state_equals_the_full_forward_and_transformers_cache(case):
    hf, ours = _pair(case)
    x = torch.randn(2, T, D_MODEL, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = ours(x)
        stepped, state = [], LayerKV("fp8")
        for t in range(T):                                        # token by token: the recurrent form only
            stepped.append(ours(x[:, t:t + 1], cache=state))
        split, state2 = [], LayerKV("fp8")
        split.append(ours(x[:, :7], cache=state2))                      # a prompt (chunked), then decoding
        split += [ours(x[:, t:t + 1], cache=state2) for t in range(7, T)]
        state3 = LayerKV("fp8")   # pieces of several tokens after the prompt (chunked prefill) start from the state too
        pieces = torch.cat([ours(x[:, a:b], cache=state3) for a, b in ((0, 4), (4, 9), (9, 10), (10, T))], 1)
    tol = dict(rtol=0, atol=2e-5 * full.abs().max().item())
    torch.testing.assert_close(torch.cat(stepped, 1), full, **tol)
    torch.testing.assert_close(torch.cat(split, 1), full, **tol)
    torch.testing.assert_close(pieces, full, **tol)
    torch.testing.assert_close(state.recurrent, state2.recurrent, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(state.conv, state2.conv, rtol=0, atol=0)


def test_chunked_scan_equals_the_recurrence_for_every_chunk_size_and_a_starting_state():
    g = torch.Generator().manual_seed(3)
    b, H, P, N, G = 2, 6, 4, 5, 3
    x, dt = torch.randn(b, T, H, P, generator=g), torch.rand(b, T, H, generator=g)
    B, C = torch.randn(b, T, G, N, generator=g), torch.randn(b, T, G, N, generator=g)
    A, h0 = -torch.rand(H, generator=g) * 2, torch.randn(b, H, P, N, generator=g)
    h, ys = h0, []
    for t in range(T):
        y, h = ssd_step(h, x[:, t], dt[:, t], A, B[:, t], C[:, t])
        ys.append(y)
    for chunk in (1, 3, 5, T, 32):
        y, final = ssd_chunked(x, dt, A, B, C, chunk, h0)
        torch.testing.assert_close(y, torch.stack(ys, 1), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(final, h, rtol=1e-5, atol=1e-5)


DIMS = [Mamba2Dims(32, 8, 8, 6, 2, 4, 5), Mamba2Dims(24, 3, 16, 4, 1, 3, 8, conv_bias=False, proj_bias=True),
        Mamba2Dims(16, 4, 6, 10, 4, 2, 16, gate="gate", in_scale=0.5, proj_scales=(1.0, 2.0, 0.5, 0.5, 1.5))]


@pytest.mark.parametrize("dims", DIMS)
def test_params_closed_form_equals_the_module(dims):
    assert sum(mamba2_params(dims).values()) == sum(p.numel() for p in Mamba2(dims).parameters())
    # by hand for the first: in_proj 32*(2*64 + 2*2*6 + 8), conv 88*4 + 88, dt_bias/A_log/D 3*8, norm 64, out 64*32
    assert sum(mamba2_params(DIMS[0]).values()) == 32 * 160 + 88 * 5 + 24 + 64 + 64 * 32


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dims", DIMS)
def test_saved_bytes_are_in_proj_output_and_out_proj_input(dims, dtype):
    """Training keeps in_proj's output and out_proj's input (and the scaled input with in_scale), nothing between:
    the conv, scan and norm are recomputed in backward, as the fused Mamba-2 kernel does."""
    m = redrawn(Mamba2(dims), 0).to(dtype)
    x = torch.randn(3, T, dims.d_model, dtype=dtype, requires_grad=True)
    e = x.element_size()
    width = dims.proj_width + dims.d_inner + (dims.d_model if dims.in_scale != 1 else 0)
    assert module_saved_bytes(m, x) == 3 * T * width * e


@pytest.mark.parametrize("seq", [5, 13, 16])
@pytest.mark.parametrize("dims", DIMS)
def test_prefill_and_backward_flops_equal_flop_counter(dims, seq):
    """Forward and backward == FlopCounterMode (engine/measure/flops.py's counter)."""
    forward, backward = meta_flops(Mamba2(dims), 2, seq)
    assert (forward, backward) == (mamba2_prefill_flops(dims, 2, seq), mamba2_backward_flops(dims, 2, seq))
    # by hand, with more than one chunk: both products of every projection; the conv and scan run again, then
    # their two gradients each
    proj = 2 * 2 * seq * (dims.d_model * dims.proj_width + dims.d_inner * dims.d_model)
    if seq > dims.chunk:
        assert backward == 2 * proj + 3 * (forward - proj)


def test_decode_flops_scan_term_is_five_d_inner_n_by_hand_count():
    dims = Mamba2Dims(32, 8, 8, 6, 2)
    H, P, N, G = 8, 8, 6, 2
    g = torch.Generator().manual_seed(4)
    args = (torch.randn(1, H, P, N, generator=g), torch.randn(1, H, P, generator=g), torch.rand(1, H, generator=g),
            -torch.rand(H, generator=g), torch.randn(1, G, N, generator=g), torch.randn(1, G, N, generator=g))
    assert hand_counted_flops(ssd_step, *args) == mamba2_decode_flops(dims) == 5 * 64 * 6 + 64 + 2 * 8
    # the weights a step multiplies (2 FLOPs each in the model's decode count): in_proj 32*(2*64 + 2*2*6 + 8),
    # out_proj 64*32, conv 88*4
    assert mamba2_matmul_params(dims) == 32 * 160 + 64 * 32 + 88 * 4


def _bamba_like(**changes) -> ModelConfig:
    """A config whose first layer is Bamba's Mamba-2 mixer below (8 heads of 8, state 6, 2 groups), then attention."""
    return ModelConfig(**{**dict(name="bamba-like", vocab_size=50, d_model=D_MODEL, n_layers=2, n_heads=4,
                                 n_kv_heads=2, layer_types=("mamba2", "full"), ssm_heads=8, ssm_head_dim=8,
                                 ssm_state=6, ssm_groups=2, ssm_chunk=5, norm="rmsnorm", ffn="swiglu", d_ff=16,
                                 position="rope", bias=False), **changes})


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_state_bytes_equal_transformers_cache_tensors(dtype):
    """transformers keeps K conv positions in the model dtype and the recurrent state in fp32 (its chunk scan
    returns an fp32 state), measured on a Bamba model's cache: engine.budget.memory.state_bytes, transformers'
    convention, == the bytes of its cache tensors."""
    from transformers import BambaConfig, BambaForCausalLM
    cfg = BambaConfig(**dict(COMMON, num_hidden_layers=2), vocab_size=50, mamba_n_heads=8, mamba_d_head=8,
                      mamba_d_state=6, mamba_n_groups=2, mamba_chunk_size=5, attn_layer_indices=[1])
    hf = BambaForCausalLM(cfg).to(torch.float32 if dtype == "fp32" else torch.bfloat16).eval()
    with torch.no_grad():
        cache = hf(torch.randint(0, 50, (3, 7)), use_cache=True).past_key_values
    layer = cache.layers[0]
    measured = {"conv": layer.conv_states[0].nbytes, "recurrent": layer.recurrent_states[0].nbytes}
    assert measured == state_bytes(_bamba_like(), 3, dtype, "transformers")


def test_state_conventions_by_their_sources_shapes():
    """vLLM MambaStateShapeCalculator.mamba2_state_shape: conv (K-1) x (d_in + 2GN), temporal (H, P, N), dtypes
    from mamba_cache_dtype / mamba_ssm_cache_dtype (our state_dtype); llama.cpp n_embd_r (K-1)*(d_in + 2GN),
    n_embd_s N*d_in, both f32. Nemotron-H-8B's mixer: d_in 8192 (128 heads of 64), 8 groups of 128 states."""
    cfg = ModelConfig(d_model=4096, n_layers=1, n_heads=32, layer_types=("mamba2",), ssm_heads=128, ssm_head_dim=64,
                      ssm_state=128, ssm_groups=8)
    c = 8192 + 2 * 8 * 128
    assert state_bytes(cfg, 1, "bf16", "vllm") == {"conv": 3 * c * 2, "recurrent": 128 * 64 * 128 * 2}
    assert state_bytes(cfg.replace(state_dtype="fp32"), 1, "bf16", "vllm") == {"conv": 3 * c * 2,
                                                                                "recurrent": 128 * 64 * 128 * 4}
    assert state_bytes(cfg, 1, "bf16", "llama.cpp") == {"conv": 3 * c * 4, "recurrent": 128 * 8192 * 4}
    assert state_bytes(cfg, 1, "bf16", "transformers") == {"conv": 4 * c * 2, "recurrent": 128 * 64 * 128 * 4}


@pytest.mark.parametrize("state_dtype", [None, "fp32"])
def test_our_decode_cache_holds_k_minus_one_conv_inputs_and_the_state_in_state_dtype(state_dtype):
    """As vLLM (kinds.OURS): K-1 conv inputs in the model's dtype, the recurrent state in state_dtype (None: the
    model's); the cache's tensors == state_bytes under that convention."""
    from engine.model import KVCache, build_model
    cfg = _bamba_like(state_dtype=state_dtype)
    model = build_model(cfg, dtype=torch.bfloat16).eval()
    cache = KVCache(cfg.n_layers)
    with torch.no_grad():
        model(torch.randint(0, 50, (2, T)), cache)
    layer = cache.layers[0]
    assert layer.conv.shape == (2, 88, 3) and layer.conv.dtype == torch.bfloat16
    assert layer.recurrent.shape == (2, 8, 8, 6)
    assert layer.state_nbytes() == sum(state_bytes(cfg, 2, "bf16", "vllm").values())


def test_dt_limits_clamp_and_the_plain_gate_has_no_norm():
    m = redrawn(Mamba2(Mamba2Dims(16, 2, 8, 4, 1, 2, 4, dt_min=0.5, dt_max=0.6)), 6)
    free = Mamba2(Mamba2Dims(16, 2, 8, 4, 1, 2, 4))
    free.load_state_dict(m.state_dict())
    x = torch.randn(1, 6, 16, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert not torch.allclose(m(x), free(x))
    assert Mamba2(Mamba2Dims(16, 2, 8, 4, gate="gate")).norm is None
    assert math.isinf(Mamba2Dims(16, 2, 8, 4).dt_max)


@pytest.mark.parametrize("chunk", [8, 64])   # the chunked scan across chunks, and one chunk
def test_a_bf16_layer_keeps_a_long_decay_as_float64_does(chunk):
    """A bf16 model's scan runs in fp32 (dt, A = -exp(A_log), the state): a state written at the first token and
    read 31 steps later, decayed by e^-15 to e^-46 per head, keeps the float64 layer's value to bf16 accuracy
    (a bf16 decay would miss by exp(46 * 2^-9) - 1, ~10%). Identity projections feed the chosen x, B, C, dt, z in
    exactly; the layer's output at the last token is compared head by head."""
    H, P, N, T = 8, 2, 4, 32
    dims = Mamba2Dims(48, H, P, N, 1, 4, chunk, conv_bias=False, gate="gate")   # proj_width 2*16 + 2*4 + 8 = 48
    layer = Mamba2(dims)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        layer.in_proj.weight.copy_(torch.eye(48))
        layer.out_proj.weight.copy_(torch.eye(48, 16))
        layer.conv1d.weight.copy_(torch.randn(layer.conv1d.weight.shape, generator=g))
        layer.A_log.copy_(torch.linspace(0.5, 1.5, H).log())
        layer.dt_bias.zero_()
        layer.D.zero_()   # no skip: the output is the decayed state alone
    x = torch.zeros(1, T, 48)
    x[..., :16] = torch.randn(1, T, 16, generator=g)                  # z
    x[:, 0, 16:32] = torch.randn(16, generator=g)                     # x at the first token only
    x[..., 32:40] = torch.randn(1, T, 8, generator=g)                 # B, C
    x[..., 40:] = 1.0                                                 # dt = softplus(1)
    x = x.bfloat16()
    with torch.no_grad():
        got = layer.bfloat16()(x)[0, -1, :16].double().view(H, P)
        want = layer.double()(x.double())[0, -1, :16].view(H, P)
    assert want.abs().max() < 1e-5                                    # the decay is real ...
    err = (got - want).norm(dim=-1) / want.norm(dim=-1)
    assert err.max() < 0.04, err                                      # ... and bf16 keeps it
