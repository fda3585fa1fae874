"""transformers 5's config-class defaults of the state-space hybrid families (engine/interop/hf_ssm.py reads a
missing or null key as these, as transformers does); registered into hf_defaults.DEFAULTS."""
from __future__ import annotations

import math

from engine.interop.hf_defaults import DEFAULTS

_MAMBA2 = dict(mamba_n_heads=128, mamba_d_head="auto", mamba_n_groups=1, mamba_d_state=256, mamba_d_conv=4,
               mamba_expand=2, mamba_chunk_size=256, mamba_conv_bias=True, mamba_proj_bias=False,
               time_step_limit=(0.0, math.inf))
DEFAULTS.update({
    "bamba": dict(_MAMBA2, vocab_size=128000, tie_word_embeddings=False, hidden_size=4096, intermediate_size=14336,
                  num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
                  rms_norm_eps=1e-5, max_position_embeddings=262144, attention_dropout=0.0, attn_layer_indices=None,
                  attention_bias=False, mlp_bias=False, rope_theta=10000.0),
    "nemotron_h": dict(vocab_size=131072, hidden_size=4096, tie_word_embeddings=False, num_attention_heads=32,
                       num_key_value_heads=8, head_dim=128, max_position_embeddings=4096, attention_bias=False,
                       attention_dropout=0.0, intermediate_size=21504, mlp_hidden_act="relu2", mlp_bias=False,
                       ssm_state_size=128, mamba_num_heads=128, mamba_head_dim=64, mamba_hidden_act="silu",
                       n_groups=8, conv_kernel=4, time_step_min=0.001, use_conv_bias=True, chunk_size=128,
                       mamba_ssm_cache_dtype="float32", n_routed_experts=8, n_shared_experts=1,
                       moe_intermediate_size=7688, moe_shared_expert_intermediate_size=7688, moe_latent_size=None,
                       num_experts_per_tok=2, routed_scaling_factor=1.0, n_group=1, topk_group=1, norm_topk_prob=True,
                       num_nextn_predict_layers=0, use_bias=False, layer_norm_epsilon=1e-5, hidden_dropout=0.0),
    "granitemoehybrid": dict(_MAMBA2, vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                             num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=None, hidden_act="silu",
                             max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=False,
                             attention_bias=False, attention_dropout=0.0, embedding_multiplier=1.0, logits_scaling=1.0,
                             residual_multiplier=1.0, attention_multiplier=1.0, num_local_experts=8,
                             num_experts_per_tok=2, router_aux_loss_coef=0.001, shared_intermediate_size=1024,
                             position_embedding_type=None, layer_types=None, rope_theta=10000.0),
    "falcon_h1": dict(_MAMBA2, vocab_size=128000, tie_word_embeddings=False, hidden_size=4096,
                      intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                      hidden_act="silu", rms_norm_eps=1e-5, max_position_embeddings=8192, attention_dropout=0.0,
                      mamba_d_ssm=1024, mamba_norm_before_gate=True, mamba_rms_norm=False, projectors_bias=False,
                      lm_head_multiplier=1.0, embedding_multiplier=1.0, mlp_multipliers=None, key_multiplier=1.0,
                      attention_out_multiplier=1.0, attention_in_multiplier=1.0, ssm_multipliers=None,
                      ssm_in_multiplier=1.0, ssm_out_multiplier=1.0, attention_bias=False, mlp_bias=False,
                      rope_theta=10000.0),
    "jamba": dict(vocab_size=65536, tie_word_embeddings=False, hidden_size=4096, intermediate_size=14336,
                  num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
                  rms_norm_eps=1e-6, router_aux_loss_coef=0.001, max_position_embeddings=262144,
                  attention_dropout=0.0, num_experts_per_tok=2, num_experts=16, expert_layer_period=2,
                  expert_layer_offset=1, attn_layer_period=8, attn_layer_offset=4, mamba_d_state=16, mamba_d_conv=4,
                  mamba_expand=2, mamba_dt_rank="auto", mamba_conv_bias=True, mamba_proj_bias=False),
})
