"""Hybrid layouts: mixtures of layer kinds (engine/layers/mixers.py), each held exactly by tests/test_hybrid.py
and against the hand-written forward in tests/test_references.py."""
from engine.config import ModelConfig
from tests.helpers import GRID_SIZES

# A new mixer kind adds its mixtures here; every closed form and measurement of test_hybrid.py then covers it.
HYBRID_BASE = dict(GRID_SIZES, n_layers=4, position="rope", norm="rmsnorm", norm_bias=False, bias=False,
                   ffn="swiglu", d_ff=24, gdn_chunk=4, ssm_head_dim=4, ssm_state=3, ssm_chunk=4, ssm_inner=12)
HYBRIDS = {
    "qwen3-next 3:1, gated attention": dict(layer_types=("gdn", "gdn", "gdn", "full"), attn_gate="elementwise",
                                            qk_norm=True, rope_fraction=0.5, gdn_k_heads=2, gdn_v_heads=4),
    "one mixer per layer (nemotron-h)": dict(layer_types=("gdn", "none", "full", "none"),
                                             ffn_types=("none", "dense", "none", "moe"), n_experts=4),
    "moe after every mixer (granite 4.0-h)": dict(layer_types=("gdn", "gdn", "full", "gdn"), n_experts=4,
                                                  n_shared_experts=1, shared_expert_gate=True),
    "moe every other layer (jamba)": dict(layer_types=("gdn", "full", "gdn", "gdn"),
                                          ffn_types=("dense", "moe", "dense", "moe"), n_experts=4),
    "attention beside gdn (falcon-h1)": dict(layer_types=("full+gdn",) * 4, gdn_conv_kernel=2),
    "sliding, per-head gate": dict(layer_types=("sliding", "gdn", "sliding+gdn", "full"), attn_window=3,
                                   attn_gate="head", gdn_conv_kernel=1),
    "latent attention beside gdn": dict(layer_types=("gdn", "full", "gdn", "full"), kv_lora_rank=6,
                                        qk_rope_head_dim=2, qk_nope_head_dim=3, v_head_dim=4),
    "post-norm, mixer-only layers": dict(norm_placement="post", layer_types=("gdn", "none", "full", "gdn"),
                                         ffn_types=("none", "dense", "dense", "none")),
    "sandwich, mixer-only layers": dict(norm_placement="sandwich", layer_types=("gdn", "none", "full", "gdn"),
                                        ffn_types=("none", "dense", "dense", "none")),
    "post-branch, mixer-only layers": dict(norm_placement="post_branch", layer_types=("gdn", "none", "full", "gdn"),
                                           ffn_types=("none", "dense", "dense", "none")),
    "parallel block, layernorm, dropout": dict(block="parallel", layer_types=("gdn", "full", "full+gdn", "gdn"),
                                               norm="layernorm", norm_bias=True, bias=True, dropout=0.1),
    "learned positions, no attention": dict(position="learned", layer_types=("gdn",) * 4, state_dtype="bf16"),
    # Mamba-2 and Mamba-1 (engine/layers/mamba2.py, mamba1.py) in each family's layout
    "nemotron-h: mamba2, attention, relu2 mlp, moe": dict(layer_types=("mamba2", "full", "none", "none"),
                                                      ffn_types=("none", "none", "dense", "moe"), ffn="relu2",
                                                      n_experts=4, ssm_groups=2, position="none"),
    "granite 4.0-h: mamba2 groups, moe after every mixer": dict(
        layer_types=("mamba2", "mamba2", "full", "mamba2"), n_experts=4, n_shared_experts=1, ssm_groups=4,
        ssm_conv_bias=False, ssm_out_scale=0.5),
    "falcon-h1: attention beside mamba2, multipliers": dict(
        layer_types=("full+mamba2",) * 4, ssm_gate="gate_normed", ssm_in_scale=0.7, ssm_out_scale=1.3,
        ssm_proj_scales=(0.5, 1.5, 2.0, 0.25, 3.0), ssm_proj_bias=True, ssm_dt_min=0.01, ssm_dt_max=5.0),
    "bamba: mamba2 plain gate, fp32 state": dict(layer_types=("mamba2", "mamba2", "full", "mamba2"),
                                                 ssm_gate="gate", ssm_conv_kernel=2, state_dtype="fp32"),
    "jamba: mamba1, moe every other layer": dict(layer_types=("mamba1", "full", "mamba1", "mamba1"),
                                                 ffn_types=("dense", "moe", "dense", "moe"), n_experts=4,
                                                 ssm_dt_norm=True, ssm_dt_rank=2, position="none"),
    # Kimi Delta Attention and lightning attention (engine/layers/kda.py, lightning.py) in their families' layouts
    "kimi linear: kda beside nope mla, moe": dict(
        layer_types=("kda", "kda", "full", "kda"), position="none", kv_lora_rank=6, qk_rope_head_dim=2,
        qk_nope_head_dim=3, v_head_dim=4, mla_norm_eps=1e-6, gdn_k_heads=2, gdn_k_dim=4, n_experts=4,
        n_shared_experts=1, moe_first_dense=1, router="sigmoid", router_selection_bias=True, routed_scale=2.0),
    "kda: grouped value heads, one tap, bf16 state asked": dict(
        layer_types=("kda", "full", "kda", "kda"), gdn_k_heads=1, gdn_v_heads=2, gdn_v_dim=3, gdn_conv_kernel=1,
        state_dtype="bf16"),
    "minimax: lightning, post-norm deepnorm, moe": dict(
        layer_types=("lightning", "lightning", "lightning", "full"), norm_placement="post", embed_norm=True,
        final_norm=False, residual_alpha=3.5, n_experts=4),
    "lightning and kda beside attention, window": dict(
        layer_types=("full+lightning", "lightning", "sliding+kda", "full"), attn_window=3, head_dim=4),
}


def hybrid_configs() -> dict[str, ModelConfig]:
    return {name: ModelConfig(**{**HYBRID_BASE, **fields}) for name, fields in HYBRIDS.items()}
