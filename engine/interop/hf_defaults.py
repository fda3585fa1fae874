"""What transformers assumes when a config.json leaves a key out, and which keys never change the forward pass.

Copied from the transformers 5 config classes; tests/test_interop_config.py checks that a config with only
`model_type` imports exactly like transformers' own defaults.
"""
from __future__ import annotations

from typing import Any

# Keys that never change what the causal-LM forward pass computes.
INERT = frozenset({
    "_name_or_path", "model_type", "architectures", "transformers_version", "dtype", "torch_dtype", "use_cache",
    "initializer_range", "pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id", "decoder_start_token_id",
    "output_hidden_states", "output_attentions", "return_dict", "chunk_size_feed_forward", "is_encoder_decoder",
    "is_decoder", "id2label", "label2id", "num_labels", "problem_type", "classifier_dropout", "tokenizer_class",
    "prefix", "task_specific_params", "finetuning_task", "tie_encoder_decoder", "torchscript", "use_bfloat16",
    "auto_map", "cache_implementation", "attn_implementation", "_attn_implementation", "_attn_implementation_autoset",
    "max_length",
    "min_length", "do_sample", "num_beams", "temperature", "top_k", "top_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "early_stopping", "bad_words_ids",
    "unk_token_id",
    "pretraining_tp",        # Llama: a tensor-parallel slicing of the same matmuls (unused by transformers 5)
    "n_ctx",                 # GPT-2: legacy duplicate of n_positions, unused
    "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
    "reorder_and_upcast_attn",  # GPT-2: computes the same scores in fp32 (a precision choice, same math)
})

_UNREAD = "which this family's config class does not read"
# Keys published configs carry that transformers' config classes and models never read (so they cannot change
# the forward pass): accepted, and listed by `import-hf --verbose` with the reason.
IGNORED: dict[str, str] = {
    "n_special": f"a GPT-1 era count of special tokens, {_UNREAD}",
    "predict_special_tokens": f"a GPT-1 era flag, {_UNREAD}",
    "sliding_window_size": "not a transformers key (the window is `sliding_window`)",
    "is_llama_config": "nanotron bookkeeping; transformers does not read it",
    "rope_interleaved": f"a nanotron flag, {_UNREAD} (which dimensions rotate together is fixed by the family)",
    "transformers.js_config": "settings for transformers.js (ONNX export), not for the model",
    "context_window_size": "an MLC LLM runtime setting (its copies of config.json carry it)",
    "prefill_chunk_size": "an MLC LLM runtime setting (its copies of config.json carry it)",
    "attention_sink_size": "an MLC LLM runtime setting (its copies of config.json carry it)",
    # Megatron-DeepSpeed training switches BLOOM's published configs carry; BloomConfig does not read them
    "offset_alibi": f"a Megatron-DeepSpeed setting, {_UNREAD}",
    "bias_dropout_fusion": "a Megatron-DeepSpeed kernel fusion switch",
    "masked_softmax_fusion": "a Megatron-DeepSpeed kernel fusion switch",
    "skip_bias_add": "a Megatron-DeepSpeed kernel fusion switch",
    "skip_bias_add_qkv": "a Megatron-DeepSpeed kernel fusion switch",
    "attention_softmax_in_fp32": "a precision switch; transformers' softmax runs in fp32 regardless",
    "n_inner": f"GPT-2's name for the MLP width, {_UNREAD}",
    # keys of the original BigCode training configs that Starcoder2Config does not read
    "activation_function": f"GPT-2's name for the activation, {_UNREAD}",
    "layer_norm_epsilon": f"GPT-2's name for the norm epsilon, {_UNREAD}",
    "norm_type": f"a training-config key, {_UNREAD}: its norm is fixed by the family",
    "mlp_type": f"a training-config key, {_UNREAD}: its MLP is fixed by the family",
    "scale_attention_softmax_in_fp32": "a precision switch; softmax runs in fp32 regardless",
    "scale_attn_weights": f"GPT-2's switch, {_UNREAD}: the scale of its scores is fixed by the family",
    "attention_bias": "this family's config class does not read it (its biases follow its own switch)",
    "mlp_bias": "this family's config class does not read it (its biases follow its own switch)",
    "runner_max_sequence_length": f"a BigCode inference-runner setting, {_UNREAD}",
    "full_attn_mod": f"a Phi-4-mini remote-code key, {_UNREAD}",
    "interpolate_factor": f"a Phi-4-mini remote-code key, {_UNREAD}",
    "lm_head_bias": f"a Phi-4-mini remote-code key, {_UNREAD} (whether the head has a bias is fixed by the family)",
    "use_qk_norm": "this family's config class does not read it: whether q and k are normalized is fixed by the "
                   "family",
    "max_window_layers": "this family's config class does not read it (its windows, if any, follow its own keys)",
    "for_llm_compressor": f"an export flag of Llama 4's checkpoints, {_UNREAD}",
}

_LLAMA = dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
              num_attention_heads=32, hidden_act="silu", max_position_embeddings=2048, rms_norm_eps=1e-6,
              tie_word_embeddings=False, attention_bias=False, mlp_bias=False, attention_dropout=0.0)
_QWEN = dict(_LLAMA, vocab_size=151936, intermediate_size=22016, max_position_embeddings=32768,
             num_key_value_heads=32, use_sliding_window=False, sliding_window=4096, max_window_layers=28,
             layer_types=None)
_GEMMA = dict(_LLAMA, vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28,
              num_attention_heads=16, num_key_value_heads=16, head_dim=256, hidden_act="gelu_pytorch_tanh",
              max_position_embeddings=8192, tie_word_embeddings=True, use_bidirectional_attention=None)
DEFAULTS: dict[str, dict[str, Any]] = {   # the transformers config-class defaults we rely on
    "llama": _LLAMA,
    "mistral": dict(_LLAMA, intermediate_size=14336, num_key_value_heads=8, max_position_embeddings=131072,
                    sliding_window=4096),
    "qwen2": _QWEN,
    "qwen3": dict(_QWEN, head_dim=128),
    "gemma": _GEMMA,
    "gemma2": dict(_GEMMA, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
                   num_key_value_heads=4, hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=256,
                   sliding_window=4096, layer_types=None, final_logit_softcapping=30.0,
                   attn_logit_softcapping=50.0),
    "gemma3_text": dict(_GEMMA, vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                        num_attention_heads=8, num_key_value_heads=4, hidden_activation="gelu_pytorch_tanh",
                        max_position_embeddings=131072, query_pre_attn_scalar=256, sliding_window=4096,
                        layer_types=None, final_logit_softcapping=None, attn_logit_softcapping=None,
                        sliding_window_pattern=6, rope_local_base_freq=10000.0, use_bidirectional_attention=False),
    "gpt2": dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
                 activation_function="gelu_new", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                 layer_norm_epsilon=1e-5, scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
                 add_cross_attention=False, tie_word_embeddings=True),
    "gpt_bigcode": dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
                        activation_function="gelu_pytorch_tanh", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                        layer_norm_epsilon=1e-5, scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
                        add_cross_attention=False, multi_query=True, tie_word_embeddings=True),
    "gpt_neox": dict(vocab_size=50432, hidden_size=6144, num_hidden_layers=44, num_attention_heads=64,
                     intermediate_size=24576, hidden_act="gelu", attention_dropout=0.0, hidden_dropout=0.0,
                     max_position_embeddings=2048, layer_norm_eps=1e-5, tie_word_embeddings=False,
                     use_parallel_residual=True, attention_bias=True),
    "falcon": dict(vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71,
                   num_ln_in_parallel_attn=None, layer_norm_epsilon=1e-5, hidden_dropout=0.0,
                   attention_dropout=0.0, num_kv_heads=None, alibi=False, new_decoder_architecture=False,
                   multi_query=True, parallel_attn=True, bias=False, max_position_embeddings=2048,
                   ffn_hidden_size=None, activation="gelu", tie_word_embeddings=True,
                   apply_residual_connection_post_layernorm=False),
    "phi3": dict(_LLAMA, vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_attention_heads=32,
                 num_key_value_heads=None, max_position_embeddings=4096, original_max_position_embeddings=4096,
                 rms_norm_eps=1e-5, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, sliding_window=None),
    "olmo2": dict(_LLAMA, vocab_size=50304, num_key_value_heads=None, rms_norm_eps=1e-5),
    "cohere": dict(vocab_size=256000, hidden_size=8192, intermediate_size=22528, logit_scale=0.0625,
                   num_hidden_layers=40, num_attention_heads=64, num_key_value_heads=None, hidden_act="silu",
                   max_position_embeddings=8192, layer_norm_eps=1e-5, tie_word_embeddings=True,
                   attention_bias=False, attention_dropout=0.0, use_qk_norm=False, rope_theta=500000.0),
    "mpt": dict(d_model=2048, n_heads=16, n_layers=24, max_seq_len=2048, vocab_size=50368, layer_norm_epsilon=1e-5,
                tie_word_embeddings=True),
    "phi": dict(vocab_size=51200, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24,
                num_attention_heads=32, num_key_value_heads=None, resid_pdrop=0.0, embd_pdrop=0.0,
                attention_dropout=0.0, hidden_act="gelu_new", max_position_embeddings=2048, layer_norm_eps=1e-5,
                tie_word_embeddings=False, qk_layernorm=False),
    "stablelm": dict(vocab_size=50304, intermediate_size=6912, hidden_size=2560, num_hidden_layers=32,
                     num_attention_heads=32, num_key_value_heads=32, hidden_act="silu", max_position_embeddings=4096,
                     layer_norm_eps=1e-5, tie_word_embeddings=False, use_qkv_bias=False, qk_layernorm=False,
                     use_parallel_residual=False, hidden_dropout=0.0, attention_dropout=0.0),
    "starcoder2": dict(vocab_size=49152, hidden_size=3072, intermediate_size=12288, num_hidden_layers=30,
                       num_attention_heads=24, num_key_value_heads=2, hidden_act="gelu_pytorch_tanh",
                       max_position_embeddings=4096, norm_epsilon=1e-5, sliding_window=None, attention_dropout=0.0,
                       residual_dropout=0.0, embedding_dropout=0.0, use_bias=True, tie_word_embeddings=True),
    "bloom": dict(vocab_size=250880, hidden_size=64, n_layer=2, n_head=8, layer_norm_epsilon=1e-5,
                  apply_residual_connection_post_layernorm=False, hidden_dropout=0.0, attention_dropout=0.0,
                  tie_word_embeddings=True),
}
_MOE = dict(num_key_value_heads=None, attention_dropout=0.0, hidden_act="silu", tie_word_embeddings=False,
            output_router_logits=False)
DEFAULTS.update({   # mixtures of experts (engine/interop/hf_moe.py)
    "mixtral": dict(_MOE, vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                    rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=None, num_local_experts=8,
                    num_experts_per_tok=2, router_aux_loss_coef=0.001, router_jitter_noise=0.0),
    "qwen2_moe": dict(_MOE, vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24,
                      num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=32768,
                      rms_norm_eps=1e-6, use_sliding_window=False, sliding_window=4096, max_window_layers=28,
                      decoder_sparse_step=1, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
                      num_experts_per_tok=4, num_experts=60, norm_topk_prob=False, router_aux_loss_coef=0.001,
                      mlp_only_layers=[], qkv_bias=True, layer_types=None),
    "qwen3_moe": dict(_MOE, vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=24,
                      num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=32768,
                      rms_norm_eps=1e-6, attention_bias=False, use_sliding_window=False, sliding_window=4096,
                      decoder_sparse_step=1, moe_intermediate_size=768, num_experts_per_tok=8, num_experts=128,
                      norm_topk_prob=False, router_aux_loss_coef=0.001, mlp_only_layers=[]),
    "olmoe": dict(_MOE, vocab_size=50304, hidden_size=2048, intermediate_size=2048, num_hidden_layers=16,
                  num_attention_heads=16, max_position_embeddings=4096, rms_norm_eps=1e-5, attention_bias=False,
                  clip_qkv=None, num_experts_per_tok=8, num_experts=64, norm_topk_prob=False,
                  router_aux_loss_coef=0.01),
})
GATED_ACTS = {"silu": "swiglu", "swish": "swiglu", "gelu": "geglu", "gelu_pytorch_tanh": "geglu_tanh",
              "gelu_new": "geglu_tanh", "relu": "reglu"}
DENSE_ACTS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu",
              "silu": "silu", "swish": "silu"}
