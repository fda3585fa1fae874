"""Every knob of the config with the overrides that make it active and a different value (tests/test_model.py
holds each to change the built model), and the fields that cannot change a forward pass, with why."""

ROPE = {"position": "rope", "rope_base": 10.0}   # base 10: both of the two frequencies are in a scaled band
LINEAR = {**ROPE, "rope_scaling": "linear"}
LLAMA3 = {**ROPE, "rope_scaling": "llama3", "rope_factor": 8.0}
YARN = {**ROPE, "rope_scaling": "yarn", "rope_factor": 4.0, "rope_original_context": 64, "rope_truncate": False}
LONGROPE = {**ROPE, "rope_scaling": "longrope", "rope_short_factor": (1.0, 1.0), "rope_long_factor": (1.0, 1.0)}
DYNAMIC = {**ROPE, "rope_scaling": "dynamic", "rope_factor": 2.0, "rope_original_context": 4}
# the tiny config every knob case starts from (test_model.py builds it as BASE)
BASE_FIELDS = dict(name="tiny", vocab_size=11, context_length=8, d_model=8, n_layers=2, n_heads=2, ffn_multiple_of=8)
# field -> (overrides of BASE_FIELDS that make the knob active, a different value); each must change the model
KNOBS = {
    "vocab_size": ({}, 12), "context_length": ({}, 9), "d_model": ({}, 12), "n_layers": ({}, 3),
    "n_heads": ({}, 4), "n_kv_heads": ({}, 1), "head_dim": ({}, 6), "attn_window": ({}, 3),
    "global_every": ({"attn_window": 3}, 2), "qk_norm": ({}, True), "attn_softcap": ({}, 1.0),
    "qkv_bias": ({"bias": False}, True), "position": ({}, "sinusoidal"), "rope_base": ({"position": "rope"}, 100.0),
    "rope_fraction": ({"position": "rope"}, 0.5), "ffn": ({}, "gelu"), "d_ff": ({}, 16),
    "ffn_multiple_of": ({"ffn": "swiglu"}, 16), "norm": ({"norm_bias": False}, "rmsnorm"),
    "norm_eps": ({}, 0.5), "norm_bias": ({}, False), "norm_affine": ({}, False), "embed_norm": ({}, True),
    "norm_placement": ({}, "post"), "final_norm": ({}, False), "block": ({}, "parallel"),
    "parallel_shared_norm": ({"block": "parallel"}, True), "bias": ({}, False), "tie_embeddings": ({}, False),
    "embed_scale": ({}, True), "logit_softcap": ({}, 1.0),
    "rope_scaling": ({**ROPE, "rope_factor": 2.0}, "linear"), "rope_factor": (LINEAR, 2.0),
    "rope_original_context": (LLAMA3, 2), "rope_low_freq_factor": (LLAMA3, 0.5),
    "rope_high_freq_factor": (LLAMA3, 8.0), "rope_beta_fast": (YARN, 8.0), "rope_beta_slow": (YARN, 0.5),
    "rope_truncate": (YARN, True), "rope_attention_factor": (YARN, 2.0),
    "layer_types": ({"attn_window": 3}, ("sliding", "full")), "attn_scale": ({}, 0.3),
    "rope_local_base": ({**ROPE, "attn_window": 3}, 100.0), "nope_layers": (ROPE, (1,)),
    "rope_short_factor": (LONGROPE, (2.0, 3.0)), "rope_long_factor": ({**LONGROPE, "rope_original_context": 4},
                                                                       (2.0, 3.0)),
    "qk_norm_scope": ({"qk_norm": True}, "all_heads"), "head_bias": ({}, True), "logit_scale": ({}, 0.5), "n_experts": ({}, 4),
    "attn_sinks": ({}, True), "swiglu_limit": ({"ffn": "swiglu_clamped"}, 0.2), "residual_alpha": ({}, 2.0),
    "attn_chunk": ({"layer_types": ("chunked", "full"), "attn_chunk": 5}, 3),
    **{name: ({"attn_temperature": 0.5, "attn_temperature_floor": 2, **extra}, value) for name, (extra, value) in {
        "attn_temperature": ({}, 0.25), "attn_temperature_floor": ({}, 3), "attn_temperature_one_based": ({}, True),
        "attn_temperature_layers": ({**ROPE, "nope_layers": (1,)}, "nope")}.items()},
    "swiglu_alpha": ({"ffn": "swiglu_clamped"}, 100.0),
    **{name: ({"n_experts": 4, **extra}, value) for name, (extra, value) in {
        "experts_per_token": ({}, 1), "expert_d_ff": ({}, 8), "n_shared_experts": ({}, 1),
        "shared_d_ff": ({"n_shared_experts": 1}, 8), "shared_expert_gate": ({"n_shared_experts": 1}, True),
        "moe_first_dense": ({}, 1), "moe_every": ({}, 2), "router": ({}, "sigmoid"),
        "router_renorm": ({}, False), "router_groups": ({"router_group_topk": 1}, 2),
        "router_group_topk": ({"router_groups": 2}, 2), "routed_scale": ({}, 2.5),
        "router_group_score": ({"router_groups": 2, "router_group_topk": 1}, "max"),
        "expert_bias": ({}, True), "router_scales_input": ({}, True)}.items()},
    "attn_out_scale": ({}, 0.5), "ffn_gate_scale": ({"ffn": "swiglu"}, 0.5), "ffn_out_scale": ({}, 2.0),
    "embed_multiplier": ({}, 3.0),
    **{name: ({"layer_types": ("mamba2", "full"), "ssm_head_dim": 4, "ssm_state": 3, **extra}, value)
       for name, (extra, value) in {
        "ssm_conv_bias": ({}, False), "ssm_conv_kernel": ({}, 2), "ssm_dt_max": ({}, 0.2),
        "ssm_dt_min": ({}, 0.2), "ssm_gate": ({}, "gate"), "ssm_groups": ({"ssm_heads": 4}, 2),
        "ssm_head_dim": ({}, 2), "ssm_heads": ({}, 2), "ssm_in_scale": ({}, 0.5), "ssm_out_scale": ({}, 2.0),
        "ssm_proj_bias": ({}, True), "ssm_proj_scales": ({}, (0.5, 1.5, 2.0, 0.25, 3.0)),
        "ssm_state": ({}, 5)}.items()},
    **{name: ({"layer_types": ("mamba1", "full"), "ssm_inner": 12, "ssm_state": 3, **extra}, value)
       for name, (extra, value) in {"ssm_dt_norm": ({}, True), "ssm_dt_rank": ({}, 3), "ssm_inner": ({}, 8)}.items()},
    "kv_lora_rank": ({"position": "rope"}, 8),
    "ffn_types": ({}, ("dense", "none")), "attn_gate": ({}, "elementwise"),
    **{name: ({"layer_types": ("gdn", "full")}, value) for name, value in {
        "gdn_k_heads": 1, "gdn_v_heads": 4, "gdn_k_dim": 3, "gdn_v_dim": 5, "gdn_conv_kernel": 2}.items()},
    **{name: ({"position": "rope", "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 3,
               "v_head_dim": 5, **extra}, value) for name, (extra, value) in {
        "q_lora_rank": ({}, 6), "qk_rope_head_dim": ({}, 2), "qk_nope_head_dim": ({}, 4), "v_head_dim": ({}, 3),
        "mla_rope_interleave": ({}, False), "mla_norm_eps": ({}, 0.5), "index_topk": ({"q_lora_rank": 6}, 2),
        "rope_mscale_all_dim": ({"rope_scaling": "yarn", "rope_factor": 4.0}, 0.707)}.items()},
    **{name: ({"position": "rope", "kv_lora_rank": 8, "q_lora_rank": 6, "qk_rope_head_dim": 4, "qk_nope_head_dim": 3,
               "v_head_dim": 5, "index_topk": 2, "index_n_heads": 2, "index_head_dim": 6}, value)
       for name, value in {"index_n_heads": 3, "index_head_dim": 8, "index_rope_interleave": True,
                           "indexer_types": ("full", "shared")}.items()}}
# training-only (the router losses' weights, tested in test_moe.py), zero at init (DeepSeek's selection bias) or
# counted apart and never built (the multi-token-prediction modules, tested in test_mtp.py); decode caches only
# (state_dtype) or the same result computed another way (gdn_chunk, ssm_chunk: test_gdn.py, test_mamba2.py);
# how the published checkpoint stores its weights (ckpt_*: bytes on disk, not the forward; test_checkpoint.py)
NOT_IN_FORWARD = {"name", "dropout", "embed_dropout", "aux_loss_coef", "z_loss_coef", "router_selection_bias",
                  "selection_bias_parameter", "mtp_depth", "state_dtype", "gdn_chunk", "ssm_chunk", "ckpt_format",
                  "ckpt_bits", "ckpt_group_size", "ckpt_double_quant", "ckpt_keep"}
