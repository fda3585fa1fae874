"""What the block diagram and layer map say about each recurrent layer (Mixer.summary), against the numbers of
the published config.json each family ships (keys named beside each line), not against the code's own dims."""
import pytest

from engine.layers.mixers import MIXERS
from engine.presets import PRESETS

MINIMAX_TEXT_01 = PRESETS["llama-3-8b"].config.replace(   # MiniMax-Text-01's lightning layers, 6144 wide
    name="minimax-text-01-lightning", d_model=6144, n_heads=64, n_kv_heads=8, head_dim=128, gdn_chunk=256,
    layer_types=("lightning",) * 32)

CASES = {
    # Qwen3-Next-80B-A3B: linear_num_key_heads 16, linear_key_head_dim 128, linear_num_value_heads 32,
    # linear_value_head_dim 128, linear_conv_kernel_dim 4; the conv runs over q, k and v: 2*16*128 + 32*128
    ("gdn", "qwen3-next-80b-a3b"): ["Gated DeltaNet", "q, k: 16 heads x 128; v: 32 heads x 128",
                                    "conv 4 taps over 8,192 channels, then SiLU",
                                    "delta rule: a 128x128 state per value head", "gated RMSNorm, out_proj"],
    # Nemotron-H-8B: mamba_num_heads 128, mamba_head_dim 64, n_groups 8, ssm_state_size 128, conv_kernel 4; the
    # conv runs over x, B and C: 128*64 + 2*8*128; the gate is RMSNorm(y * silu(z)) by group (MambaRMSNormGated)
    ("mamba2", "nemotron-h-8b"): ["Mamba-2", "in_proj to z, x (128 heads x 64), B, C (8 groups x 128), dt",
                                  "conv 4 taps over 10,240 channels, then SiLU", "scan: a 64x128 state per head",
                                  "RMSNorm(y * silu(z)) per group, out_proj"],
    # Jamba-v0.1: hidden_size 4096 x mamba_expand 2, mamba_dt_rank 256, mamba_d_state 16, mamba_d_conv 4
    ("mamba1", "jamba-v0.1"): ["Mamba-1", "in_proj to x, z (8,192 channels each)",
                               "conv 4 taps, then SiLU; x_proj to dt (rank 256), B, C (16)",
                               "selective scan: 16 states per channel", "y * silu(z), out_proj"],
    # Kimi-Linear-48B-A3B: linear_attn_config num_heads 32, head_dim 128, short_conv_kernel_size 4; q, k and v
    # each get a conv: 3*32*128
    ("kda", "kimi-linear-48b-a3b"): ["Kimi Delta Attention", "q, k: 32 heads x 128; v: 32 heads x 128",
                                     "conv 4 taps over 12,288 channels, then SiLU",
                                     "delta rule, a decay per key channel: a 128x128 state per value head",
                                     "sigmoid-gated RMSNorm, o_proj"],
    # MiniMax-Text-01: num_attention_heads 64, head_dim 128, block_size 256
    ("lightning", None): ["lightning attention", "q, k, v: 64 heads x 128, SiLU",
                          "linear attention, a fixed decay per head and layer: a 128x128 state per head",
                          "blocks of 256 tokens in training", "RMSNorm, sigmoid output gate, out_proj"],
}


@pytest.mark.parametrize("kind, preset", list(CASES))
def test_a_recurrent_layer_is_described_with_its_published_sizes(kind, preset):
    cfg = PRESETS[preset].config if preset else MINIMAX_TEXT_01
    assert MIXERS[kind].summary(cfg) == CASES[kind, preset]
