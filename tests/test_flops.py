"""FLOP closed forms: FlopCounterMode on every variant pair, the Llama-2-7B reference, rules of thumb, roofline."""
import pytest

from engine.budget.devices import DEVICE_PROFILES, fmt_ratio, roofline
from engine.budget.flops import arithmetic_intensity, decode_flops, flops_budget, matmul_params
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.measure.flops import counted_flops, measure_flops
from engine.presets import get_preset
from tests.helpers import grid_cases, make, variant_configs

CONFIGS = variant_configs()


# SDPA on every second config; the explicit path on every fourth. On the meta device SDPA runs its math composite,
# the same two batched matmuls as the explicit path, so the explicit half can only differ by a matmul of its own,
# which a quarter of the grid (every knob's values still among them) shows as well as half.
@pytest.mark.parametrize("i, impl", [c for c in grid_cases(CONFIGS, step=2)
                                     if c.values[1] == "sdpa" or c.values[0] % 4 == 0])
def test_flops_equal_flop_counter(i, impl):
    for name, m in measure_flops(CONFIGS[i], 2, 6, impl).items():
        assert m.estimate == m.measured, (CONFIGS[i], name, m)   # exact, as the README says


def test_llama2_7b_forward_matches_calflops():
    # calflops' published figure for meta-llama/Llama-2-7b-hf at batch 1, seq 128: 1.70007e12 FLOPs
    # (= 2 x 850.00 GMACs). It counts the linear layers and the attention matmuls (QK^T, PV over the full
    # 128x128 square) as 2 FLOPs per MAC, plus the few elementwise FLOPs it also hooks (softmax, SiLU,
    # RMSNorm, rotary products); we count matmuls only, 0.004% below.
    cfg = get_preset("llama-2-7b").config
    fwd = flops_budget(cfg, 1, 128).forward_flops
    # a tolerance here because calflops also counts elementwise ops we leave out (see above)
    assert abs(fwd / 1.70007e12 - 1) < 0.005
    assert counted_flops(cfg, 1, 128)[0] == fwd           # FlopCounterMode on meta agrees exactly


def test_flops_per_byte_read_whole_from_10_and_to_two_digits_below():
    """A slow CPU's ridge of 0.24 FLOP/B must not read 0; a GPU's 295.3 reads 295."""
    assert [fmt_ratio(x) for x in (0.24, 3.456, 10.0, 295.3, 12_345.6)] == ["0.24", "3.5", "10", "295", "12,346"]


def test_matmul_params_are_the_matrices():
    cfg = get_preset("gpt2").config
    c = count_params(cfg)
    norms_biases = c.total - c.components["token_embedding"] - c.components["positions"] - (
        matmul_params(cfg) - cfg.vocab_size * cfg.d_model)
    # per block: two LayerNorms (gain+bias), q/k/v and o biases, FFN biases; plus the final LayerNorm
    assert norms_biases == 12 * (2 * 2 * 768 + 3 * 768 + 768 + 3072 + 768) + 2 * 768


def test_rules_of_thumb_side_by_side():
    cfg = get_preset("gpt2").config
    b = flops_budget(cfg, 4, 1024)
    n, total = count_params(cfg).non_embedding, count_params(cfg).total
    assert b.six_n_per_token == 6 * n                                        # Kaplan: non-embedding N
    assert b.palm_per_token == 6 * total + 12 * 12 * 12 * 64 * 1024          # PaLM: all N, embeddings included
    assert b.backward_flops == 2 * b.forward_flops
    assert b.flops_per_token == pytest.approx(3 * b.forward_flops / 4096)
    # the full-square count differs from PaLM's rule by 6 x the parameters in no matrix product (biases, norms,
    # learned positions): the tied embedding is the head's matrix
    assert b.palm_per_token - b.flops_per_token == 6 * (total - matmul_params(cfg))


def test_palm_540b_mfu_is_its_published_46_2_percent():
    """Chowdhery et al. 2022: PaLM 540B (Table 1: 118 layers, d_model 18,432, 48 heads of 256, multi-query,
    SwiGLU d_ff 4 x d_model, parallel block, shared 256k embedding, no biases) trained at 238.3K tokens/s on 6,144
    TPU v4 chips of 275 TFLOP/s bf16 at 46.2% MFU, with model FLOPs 6N + 12*L*H*Q*T over all N at T = 2,048."""
    palm = ModelConfig(name="palm-540b", vocab_size=256_000, context_length=2048, d_model=18432, n_layers=118,
                       n_heads=48, n_kv_heads=1, head_dim=256, ffn="swiglu", d_ff=4 * 18432, block="parallel",
                       norm="layernorm", norm_bias=False, bias=False, position="rope", tie_embeddings=True)
    assert abs(count_params(palm).total / 1e9 - 540.35) < 0.01               # PaLM's stated 540.35B parameters
    per_token = flops_budget(palm, 1, 2048).palm_per_token
    mfu = per_token * 238.3e3 / (6144 * 275e12)
    assert round(100 * mfu, 1) == 46.2


def test_causal_flag_counts_visible_pairs():
    cfg = ModelConfig(d_model=16, n_heads=4, n_layers=3, attn_window=4, global_every=3, vocab_size=13)
    full, causal = flops_budget(cfg, 1, 10), flops_budget(cfg, 1, 10, causal=True)
    assert full.attention_flops == 4 * 16 * 3 * 100
    pairs = 2 * (4 * 5 // 2 + 6 * 4) + 10 * 11 // 2         # two window layers, one global
    assert causal.attention_flops == 4 * 16 * pairs
    assert causal.matmul_flops == full.matmul_flops


def test_decode_step_and_intensity():
    cfg = get_preset("llama-2-7b").config
    assert decode_flops(cfg, 1, 127) == flops_budget(cfg, 1, 128, causal=True).forward_flops - \
        flops_budget(cfg, 1, 127, causal=True).forward_flops
    it = arithmetic_intensity(cfg, 1, 512, "bf16")
    assert it["decode"].flops_per_byte < 2 < it["prefill"].flops_per_byte


def test_roofline_verdicts():
    cfg = get_preset("llama-2-7b").config
    r = roofline(cfg, "H100", 8, 2048)
    assert r["prefill"].bound == "compute" and r["decode"].bound == "memory"
    assert r["decode"].ridge == pytest.approx(989.4e12 / 3.35e12)
    assert "memory-bound" in r["decode"].verdict
    assert {"H100", "H200", "A100", "RTX 4090", "CPU (measured)"} <= set(DEVICE_PROFILES)
    with pytest.raises(ValueError, match="device"):
        roofline(cfg, "TPU", 1, 1)


def test_cpu_profile_is_measured_and_cached():
    cpu = DEVICE_PROFILES["CPU (measured)"]
    first = cpu.peak_flops
    assert first["fp32"] > 1e8 and cpu.mem_bandwidth > 1e8
    assert cpu.peak_flops is first


def test_bad_sizes():
    with pytest.raises(ValueError, match="seq"):
        flops_budget(get_preset("gpt2").config, 1, 0)


def test_flop_budget_as_dict_is_every_field_plus_train_flops():
    from dataclasses import fields
    b = flops_budget(get_preset("gpt2").config, 2, 64)
    assert b.as_dict() == {**{f.name: getattr(b, f.name) for f in fields(b)},
                           "train_flops": b.forward_flops + b.backward_flops}


def test_each_intensity_says_what_it_divides():
    """The Budgets page prints the formula beside each arithmetic intensity: FLOPs over the bytes moved, where a
    prefill writes the KV cache and a decode step reads it."""
    it = arithmetic_intensity(make({}), 2, 16, "bf16")
    for phase, kv in (("prefill", "KV cache written"), ("decode", "KV cache read")):
        assert "FLOPs / (weights + " in it[phase].formula and kv in it[phase].formula, phase


def test_roofline_time_is_the_slower_of_compute_and_memory():
    """Llama-2-7B on an H100 (989.4 TFLOP/s bf16, 3.35 TB/s): a decode step takes as long as reading the weights
    and the KV cache once (13.5 GB + 8.6 GB: about 6.6 ms for batch 8 after 2,048 tokens); a prefill as long as its FLOPs at peak."""
    cfg = get_preset("llama-2-7b").config
    r = roofline(cfg, "H100", 8, 2048)
    weights = count_params(cfg).total * 2
    kv = 32 * 2 * 4096 * 8 * 2049 * 2                    # layers x K,V x width x batch x tokens x bf16
    assert r["decode"].time_s == pytest.approx((weights + kv) / 3.35e12)
    assert 6.5e-3 < r["decode"].time_s < 6.7e-3
    assert r["prefill"].time_s == pytest.approx(flops_budget(cfg, 8, 2048, causal=True).forward_flops / 989.4e12)


def test_intensity_and_roofline_default_to_bf16():
    """The Budgets page and the CLI leave the dtype out: the intensities and the roofline are then bf16's (2 B a
    weight), not fp32's, whose doubled traffic would halve every decode intensity."""
    cfg = get_preset("gpt2").config
    short, bf16, fp32 = (arithmetic_intensity(cfg, 2, 64, *d) for d in ((), ("bf16",), ("fp32",)))
    assert short == bf16 and short["decode"].bytes != fp32["decode"].bytes
    assert roofline(cfg, "H100", 2, 64) == roofline(cfg, "H100", 2, 64, "bf16") != roofline(cfg, "H100", 2, 64, "fp32")
