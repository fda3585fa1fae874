"""Named real-model configurations, each with its reference parameter count and where that count comes from.
(longer than 300 lines: one table of every preset with its source, as litgpt's config.py keeps its models.)

Counts from Hugging Face are `sum(p.numel() for p in model.parameters())` of the transformers model built on the
meta device from the model's published config.json (a tied matrix counts once).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from engine.config import ModelConfig
from engine.interop.hf_ssm import nemotron_layers
from engine.validation import choice_problem


@dataclass(frozen=True)
class Preset:
    config: ModelConfig
    reference_params: int
    source: str
    notes: str = ""


_LLAMA = dict(norm="rmsnorm", bias=False, position="rope", ffn="swiglu", tie_embeddings=False)
_NOPE = dict(_LLAMA, position="none")             # the hybrids' attention: no positional encoding at all
_NEMOTRON = dict(_NOPE, ffn="relu2")
_GPT2 = dict(vocab_size=50257, context_length=1024, position="learned", ffn="gelu_tanh", tie_embeddings=True)

# DeepSeek-V2/V3 extend 4,096 positions 40-fold with YaRN; mscale = mscale_all_dim gives cos/sin factor 1
_DEEPSEEK_YARN = dict(rope_scaling="yarn", rope_factor=40.0, rope_original_context=4096, rope_attention_factor=1.0)
_LLAMA3_1 = dict(rope_scaling="llama3", rope_factor=8.0, rope_original_context=8192, rope_low_freq_factor=1.0,
                 rope_high_freq_factor=4.0, norm_eps=1e-5)
# Phi-3.5-mini's LongRoPE divisors, as published in its config.json (rope_scaling.short_factor / long_factor)
_PHI35_SHORT = (
    1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842,
    1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979,
    1.0999999046325684, 1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662,
    1.2899998426437378, 1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083,
    1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745,
    2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
    2.0199997425079346, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0799996852874756, 2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533,
    2.729999542236328, 2.749999523162842, 2.8399994373321533)
_PHI35_LONG = (
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115,
    1.600000023841858, 1.6200000047683716, 2.620000123977661, 3.2300000190734863, 3.2300000190734863,
    4.789999961853027, 7.400000095367432, 7.700000286102295, 9.09000015258789, 12.199999809265137,
    17.670000076293945, 24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992, 50.340003967285156,
    50.45000457763672, 57.55000305175781, 57.93000411987305, 58.21000289916992, 60.1400032043457,
    62.61000442504883, 62.62000274658203, 62.71000289916992, 63.1400032043457, 63.1400032043457,
    63.77000427246094, 63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
    64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938, 64.4800033569336,
    64.51000213623047, 64.52999877929688, 64.83999633789062)
_HF = "Hugging Face transformers, meta-device count of config.json at huggingface.co/"

# Hybrid models (engine/layers/mixers.py): recurrent layers beside attention. Sources: tests/data/hf_configs/SOURCES.md
_QWEN_NEXT = dict(_LLAMA, qk_norm=True, norm_eps=1e-6, rope_base=1e7, rope_fraction=0.25, attn_gate="elementwise",
                  head_dim=256, gdn_k_heads=16, gdn_v_heads=32, gdn_k_dim=128, gdn_v_dim=128, gdn_conv_kernel=4)
HYBRID_PRESETS = [
    Preset(ModelConfig(name="qwen3-next-80b-a3b", **_QWEN_NEXT, vocab_size=151936, context_length=262144,
                       d_model=2048, n_layers=48, n_heads=16, n_kv_heads=2, d_ff=5120,
                       layer_types=("gdn", "gdn", "gdn", "full") * 12, n_experts=512, experts_per_token=10,
                       expert_d_ff=512, n_shared_experts=1, shared_d_ff=512, shared_expert_gate=True,
                       aux_loss_coef=0.001), 79_674_391_296, _HF + "Qwen/Qwen3-Next-80B-A3B-Instruct",
           "Three Gated DeltaNet layers beside every gated-attention layer: only 12 of 48 layers keep a KV cache "
           "(24,576 bytes per token in bf16); 512 experts top-10 plus a gated shared one: 3,874,929,408 active."),
    Preset(ModelConfig(name="qwen3.5-9b", **{**_QWEN_NEXT, "head_dim": None}, vocab_size=248320, context_length=262144, d_model=4096,
                       n_layers=32, n_heads=16, n_kv_heads=4, d_ff=12288, layer_types=("gdn", "gdn", "gdn", "full") * 8,
                       state_dtype="fp32"), 8_953_803_264, _HF + "Qwen/Qwen3.5-9B (text_config)",
           "Dense Qwen3.5: 24 Gated DeltaNet and 8 gated-attention layers; the recurrent state is kept in fp32 "
           "(mamba_ssm_dtype). Text model only (the vision tower and the MTP layer are not counted)."),
    Preset(ModelConfig(name="qwen3.5-35b-a3b", **_QWEN_NEXT, vocab_size=248320, context_length=262144,
                       d_model=2048, n_layers=40, n_heads=16, n_kv_heads=2, layer_types=("gdn", "gdn", "gdn", "full") * 10,
                       n_experts=256, experts_per_token=8, expert_d_ff=512, n_shared_experts=1, shared_d_ff=512,
                       shared_expert_gate=True, aux_loss_coef=0.001), 34_660_610_688,
           _HF + "Qwen/Qwen3.5-35B-A3B (text_config)",
           "Qwen3.5 MoE: 30 Gated DeltaNet and 10 gated-attention layers, 256 experts top-8 plus a gated shared "
           "one in every layer: 3,454,988,928 active. Text model only."),
    Preset(ModelConfig(name="kimi-linear-48b-a3b", **{k: v for k, v in _LLAMA.items() if k != "position"},
                       position="none", vocab_size=163840, context_length=1048576, d_model=2304, n_layers=27,
                       n_heads=32, d_ff=9216, kv_lora_rank=512, mla_norm_eps=1e-6, gdn_k_heads=32, gdn_k_dim=128,
                       layer_types=("kda", "kda", "kda", "full") * 6 + ("kda", "kda", "full"), n_experts=256,
                       experts_per_token=8, expert_d_ff=1024, n_shared_experts=1, moe_first_dense=1,
                       router="sigmoid", router_selection_bias=True, routed_scale=2.446), 49_122_675_072,
           _HF + "moonshotai/Kimi-Linear-48B-A3B-Instruct",
           "Kimi Delta Attention (a decay per key channel) in 20 of 27 layers, NoPE MLA in the other 7 (the 4th, "
           "8th, ... and the last): only 7 layers keep a (latent) KV cache; 256 experts top-8 plus a shared one "
           "after one dense layer: 3,484,453,248 active."),
]

PRESETS: dict[str, Preset] = {p.config.name: p for p in [
    Preset(ModelConfig(name="gpt2", **_GPT2, d_model=768, n_layers=12, n_heads=12), 124_439_808,
           _HF + "openai-community/gpt2", "Radford et al. 2019; learned positions, tied head, tanh-GELU."),
    Preset(ModelConfig(name="gpt2-medium", **_GPT2, d_model=1024, n_layers=24, n_heads=16), 354_823_168,
           _HF + "openai-community/gpt2-medium"),
    Preset(ModelConfig(name="llama-2-7b", **_LLAMA, vocab_size=32000, context_length=4096, d_model=4096,
                       n_layers=32, n_heads=32, d_ff=11008, norm_eps=1e-5), 6_738_415_616,
           _HF + "meta-llama/Llama-2-7b-hf"),
    Preset(ModelConfig(name="llama-3-8b", **_LLAMA, vocab_size=128256, context_length=8192, d_model=4096,
                       n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336, rope_base=500000.0), 8_030_261_248,
           _HF + "meta-llama/Meta-Llama-3-8B", "GQA with 8 key/value heads."),
    Preset(ModelConfig(name="llama-3-70b", **_LLAMA, vocab_size=128256, context_length=8192, d_model=8192,
                       n_layers=80, n_heads=64, n_kv_heads=8, d_ff=28672, rope_base=500000.0), 70_553_706_496,
           _HF + "meta-llama/Meta-Llama-3-70B"),
    Preset(ModelConfig(name="llama-3.1-8b", **_LLAMA, vocab_size=128256, context_length=131072, d_model=4096,
                       n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336, rope_base=500000.0, **_LLAMA3_1),
           8_030_261_248, _HF + "meta-llama/Llama-3.1-8B",
           "Llama 3 8B plus llama3 RoPE scaling: low frequencies slowed 8x to reach 128K tokens."),
    Preset(ModelConfig(name="llama-3.2-1b", **{**_LLAMA, "tie_embeddings": True}, vocab_size=128256,
                       context_length=131072, d_model=2048, n_layers=16, n_heads=32, n_kv_heads=8,
                       d_ff=8192, rope_base=500000.0, **{**_LLAMA3_1, "rope_factor": 32.0}), 1_235_814_400,
           _HF + "meta-llama/Llama-3.2-1B", "Tied head; llama3 RoPE scaling with factor 32."),
    Preset(ModelConfig(name="mistral-7b", **_LLAMA, vocab_size=32000, context_length=32768, d_model=4096,
                       n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336, attn_window=4096), 7_241_732_096,
           _HF + "mistralai/Mistral-7B-v0.1", "Sliding window of 4096 in every layer (v0.1)."),
    Preset(ModelConfig(name="qwen2.5-0.5b", **{**_LLAMA, "tie_embeddings": True}, vocab_size=151936,
                       context_length=32768, d_model=896, n_layers=24, n_heads=14, n_kv_heads=2, d_ff=4864,
                       qkv_bias=True, norm_eps=1e-6, rope_base=1000000.0), 494_032_768,
           _HF + "Qwen/Qwen2.5-0.5B", "Biases on q, k, v only; tied head."),
    Preset(ModelConfig(name="qwen3-0.6b", **{**_LLAMA, "tie_embeddings": True}, vocab_size=151936,
                       context_length=40960, d_model=1024, n_layers=28, n_heads=16, n_kv_heads=8, head_dim=128,
                       d_ff=3072, qk_norm=True, norm_eps=1e-6, rope_base=1000000.0), 596_049_920,
           _HF + "Qwen/Qwen3-0.6B", "head_dim 128 with 16 heads: attention width 2048 is twice d_model; QK-norm."),
    Preset(ModelConfig(name="gemma-2-2b", norm="rmsnorm", bias=False, position="rope",
                       ffn="geglu_tanh", tie_embeddings=True, vocab_size=256000, context_length=8192, d_model=2304,
                       n_layers=26, n_heads=8, n_kv_heads=4, head_dim=256, d_ff=9216, norm_eps=1e-6,
                       norm_placement="sandwich", attn_window=4096, global_every=2, attn_softcap=50.0,
                       logit_softcap=30.0, embed_scale=True), 2_614_341_888,
           _HF + "google/gemma-2-2b", "Sandwich norms, local/global alternation, soft-capped scores and logits."),
    Preset(ModelConfig(name="phi-3.5-mini", **_LLAMA, vocab_size=32064, context_length=131072, d_model=3072,
                       n_layers=32, n_heads=32, d_ff=8192, norm_eps=1e-5, attn_window=262144, rope_scaling="longrope",
                       rope_factor=32.0, rope_original_context=4096, rope_short_factor=_PHI35_SHORT,
                       rope_long_factor=_PHI35_LONG), 3_821_079_552, _HF + "microsoft/Phi-3.5-mini-instruct",
           "LongRoPE: one divisor per frequency, short ones within 4,096 tokens, long ones beyond (to 128K); "
           "fused qkv and gate/up projections in the checkpoint."),
    Preset(ModelConfig(name="gemma-3-1b", norm="rmsnorm", bias=False, position="rope",
                       ffn="geglu_tanh", tie_embeddings=True, vocab_size=262144, context_length=32768, d_model=1152,
                       n_layers=26, n_heads=4, n_kv_heads=1, head_dim=256, d_ff=6912, norm_eps=1e-6,
                       norm_placement="sandwich", attn_window=512, global_every=6, qk_norm=True, embed_scale=True,
                       rope_base=1000000.0, rope_local_base=10000.0), 999_885_952,
           _HF + "google/gemma-3-1b-it", "Five local layers (window 512, RoPE base 10,000) per global one (base "
           "1,000,000); QK-norm; sandwich norms."),
    Preset(ModelConfig(name="falcon-7b", norm="layernorm", bias=False, position="rope", ffn="gelu",
                       tie_embeddings=True, vocab_size=65024, context_length=2048, d_model=4544, n_layers=32,
                       n_heads=71, n_kv_heads=1, head_dim=64, block="parallel", parallel_shared_norm=True),
           6_921_720_704, _HF + "tiiuae/falcon-7b", "Parallel block with one shared norm; multi-query attention; tied head."),
    Preset(ModelConfig(name="pythia-160m", norm="layernorm", bias=True, position="rope", rope_fraction=0.25,
                       ffn="gelu", tie_embeddings=False, vocab_size=50304, context_length=2048, d_model=768,
                       n_layers=12, n_heads=12, block="parallel"), 162_322_944,
           _HF + "EleutherAI/pythia-160m", "GPT-NeoX: parallel block with two norms, rotary on 25% of each head."),
    Preset(ModelConfig(name="olmo-1b", norm="layernorm", norm_bias=False, norm_affine=False, bias=False,
                       position="rope", ffn="swiglu", tie_embeddings=True, vocab_size=50304, context_length=2048,
                       d_model=2048, n_layers=16, n_heads=16, d_ff=8192), 1_176_764_416,
           _HF + "allenai/OLMo-1B-hf", "Parameter-free LayerNorm. OLMo's clip_qkv clamp is not modelled."),
    Preset(ModelConfig(name="olmo-2-7b", **_LLAMA, vocab_size=100352, context_length=4096, d_model=4096,
                       n_layers=32, n_heads=32, d_ff=11008, rope_base=500000.0, norm_eps=1e-6,
                       norm_placement="post_branch", qk_norm=True, qk_norm_scope="all_heads"), 7_298_617_344,
           _HF + "allenai/OLMo-2-1124-7B",
           "Norms on the attention and MLP outputs instead of their inputs; QK RMSNorm over all heads at once."),
    Preset(ModelConfig(name="bloom-560m", norm="layernorm", bias=True, position="alibi", ffn="gelu_tanh",
                       embed_norm=True, tie_embeddings=True, vocab_size=250880, context_length=2048, d_model=1024,
                       n_layers=24, n_heads=16), 559_214_592, _HF + "bigscience/bloom-560m",
           "ALiBi instead of position embeddings; a LayerNorm right after the embeddings; 250,880-token vocabulary."),
    Preset(ModelConfig(name="starcoder2-7b", norm="layernorm", bias=True, position="rope", ffn="gelu_tanh",
                       tie_embeddings=True, vocab_size=49152, context_length=16384, d_model=4608, n_layers=32,
                       n_heads=36, n_kv_heads=4, d_ff=18432, attn_window=4096, rope_base=1000000.0, dropout=0.1),
           7_173_923_840, _HF + "bigcode/starcoder2-7b",
           "Biases everywhere, LayerNorm, GQA-4, a 4,096-token window in every layer; dropout 0.1 as published."),
    Preset(ModelConfig(name="mixtral-8x7b", **_LLAMA, vocab_size=32000, context_length=32768, d_model=4096,
                       n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336, rope_base=1e6, n_experts=8,
                       experts_per_token=2, expert_d_ff=14336, aux_loss_coef=0.02), 46_702_792_704,
           _HF + "mistralai/Mixtral-8x7B-v0.1",
           "8 SwiGLU experts per layer, top-2 renormalised: 12,879,925,248 active parameters per token."),
    Preset(ModelConfig(name="qwen3-30b-a3b", **_LLAMA, vocab_size=151936, context_length=40960, d_model=2048,
                       n_layers=48, n_heads=32, n_kv_heads=4, head_dim=128, d_ff=6144, qk_norm=True,
                       norm_eps=1e-6, rope_base=1e6, n_experts=128, experts_per_token=8, expert_d_ff=768,
                       aux_loss_coef=0.001), 30_532_122_624, _HF + "Qwen/Qwen3-30B-A3B",
           "128 narrow experts (768), top-8 renormalised: 3,353,032,704 active parameters per token."),
    Preset(ModelConfig(name="qwen1.5-moe-a2.7b", **_LLAMA, vocab_size=151936, context_length=32768, d_model=2048,
                       n_layers=24, n_heads=16, d_ff=5632, qkv_bias=True, norm_eps=1e-6, rope_base=1e6,
                       n_experts=60, experts_per_token=4, expert_d_ff=1408, n_shared_experts=1, shared_d_ff=5632,
                       shared_expert_gate=True, router_renorm=False, aux_loss_coef=0.001), 14_315_784_192,
           _HF + "Qwen/Qwen1.5-MoE-A2.7B",
           "60 experts top-4 (not renormalised) plus one gated shared expert: 2,689,173,504 active."),
    Preset(ModelConfig(name="olmoe-1b-7b", **_LLAMA, vocab_size=50304, context_length=4096, d_model=2048,
                       n_layers=16, n_heads=16, d_ff=1024, qk_norm=True, qk_norm_scope="all_heads", n_experts=64,
                       experts_per_token=8, expert_d_ff=1024, router_renorm=False), 6_919_161_856,
           _HF + "allenai/OLMoE-1B-7B-0924",
           "64 experts top-8, QK-norm over all heads at once: 1,282,017,280 active parameters per token."),
    Preset(ModelConfig(name="gpt-oss-20b", **{**_LLAMA, "ffn": "swiglu_clamped", "bias": True}, vocab_size=201088,
                       context_length=131072, d_model=2880, n_layers=24, n_heads=64, n_kv_heads=8, head_dim=64,
                       d_ff=2880, attn_window=128, global_every=2, attn_sinks=True, rope_base=150000.0,
                       rope_scaling="yarn", rope_factor=32.0, rope_original_context=4096, rope_truncate=False,
                       n_experts=32, experts_per_token=4, expert_d_ff=2880, router="topk_softmax", expert_bias=True,
                       aux_loss_coef=0.9, ckpt_format="mxfp4"), 20_914_757_184, _HF + "openai/gpt-oss-20b",
           "Attention sinks, a 128-token window on every other layer, YaRN x32; 32 biased experts top-4 with the "
           "clamped SwiGLU: 4,187,440,704 active. Experts are published in MXFP4 (ckpt_format); counted as "
           "transformers builds them (bf16 shapes)."),
    Preset(ModelConfig(name="deepseek-v3", **_LLAMA, vocab_size=129280, context_length=163840, d_model=7168,
                       n_layers=61, n_heads=128, d_ff=18432, norm_eps=1e-6, kv_lora_rank=512, q_lora_rank=1536,
                       qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, n_experts=256,
                       experts_per_token=8, expert_d_ff=2048, n_shared_experts=1, moe_first_dense=3,
                       router="sigmoid", router_selection_bias=True, router_groups=8, router_group_topk=4,
                       routed_scale=2.5, **_DEEPSEEK_YARN, rope_mscale_all_dim=1.0, mtp_depth=1,
                       ckpt_format="fp8_block", ckpt_group_size=128), 671_026_404_352,
           _HF + "deepseek-ai/DeepSeek-V3",
           "MLA (latent 512 + rotary key 64 cached per layer) and 256 sigmoid-routed experts top-8 in 8 groups "
           "(best 4) plus one shared: 37,552,282,624 active. YaRN x40 with DeepSeek's softmax correction. Its "
           "multi-token-prediction module (11,610,067,968, not built by transformers' causal LM) is counted "
           "apart, not in the total."),
    Preset(ModelConfig(name="deepseek-v3.2", **_LLAMA, vocab_size=129280, context_length=163840, d_model=7168,
                       n_layers=61, n_heads=128, d_ff=18432, norm_eps=1e-6, kv_lora_rank=512, q_lora_rank=1536,
                       qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, index_topk=2048, index_n_heads=64,
                       index_head_dim=128, n_experts=256, experts_per_token=8, expert_d_ff=2048, n_shared_experts=1,
                       moe_first_dense=3, router="sigmoid", router_selection_bias=True, router_groups=8,
                       router_group_topk=4, routed_scale=2.5, **_DEEPSEEK_YARN, rope_mscale_all_dim=1.0, mtp_depth=1,
                       ckpt_format="fp8_block", ckpt_group_size=128),
           671_877_929_216, _HF + "deepseek-ai/DeepSeek-V3.2",
           "DeepSeek-V3 plus DeepSeek Sparse Attention: a lightning indexer (64 heads of 128, 13,959,424 parameters "
           "a layer) keeps the 2,048 best earlier keys of every query, so MLA's cost stops growing with the "
           "context while the indexer's still does; its key cache is 132 B a token and layer in FP8. "
           "38,403,807,488 active; the multi-token-prediction module (11,624,027,392, with its own indexer) is "
           "counted apart."),
    Preset(ModelConfig(name="glm-5", **_LLAMA, vocab_size=154880, context_length=202752, d_model=6144, n_layers=78,
                       n_heads=64, d_ff=12288, norm_eps=1e-5, mla_norm_eps=1e-6, kv_lora_rank=512, q_lora_rank=2048,
                       qk_rope_head_dim=64, qk_nope_head_dim=192, v_head_dim=256, index_topk=2048, index_n_heads=32,
                       index_head_dim=128, index_rope_interleave=True, rope_base=1e6, n_experts=256,
                       experts_per_token=8, expert_d_ff=2048, n_shared_experts=1, moe_first_dense=3, router="sigmoid",
                       router_selection_bias=True, routed_scale=2.5, mtp_depth=1), 743_911_199_232,
           _HF + "zai-org/GLM-5",
           "DeepSeek-V3.2's design at GLM's sizes: MLA with 192 + 64 query/key and 256 value widths, a 32-head "
           "indexer rotating adjacent pairs keeping 2,048 keys, 256 experts top-8 in one group: 41,784,709,632 "
           "active. Block norms eps 1e-5, latent norms 1e-6."),
    Preset(ModelConfig(name="kimi-k2", **_LLAMA, vocab_size=163840, context_length=131072, d_model=7168, n_layers=61,
                       n_heads=64, d_ff=18432, norm_eps=1e-6, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64,
                       qk_nope_head_dim=128, v_head_dim=128, n_experts=384, experts_per_token=8, expert_d_ff=2048,
                       n_shared_experts=1, moe_first_dense=1, router="sigmoid", router_selection_bias=True,
                       routed_scale=2.827, rope_base=50000.0, rope_scaling="yarn", rope_factor=32.0,
                       rope_original_context=4096, rope_beta_fast=1.0, rope_attention_factor=1.0,
                       rope_mscale_all_dim=1.0, ckpt_format="fp8_block", ckpt_group_size=128), 1_026_408_209_408, _HF + "moonshotai/Kimi-K2-Instruct",
           "DeepSeek-V3's architecture (its config.json says model_type kimi_k2) with half the heads (64), 384 "
           "experts top-8 in one group and one dense layer: 32,861,477,888 active. YaRN x32 from 4,096."),
    Preset(ModelConfig(name="deepseek-v2-lite", **_LLAMA, vocab_size=102400, context_length=163840, d_model=2048,
                       n_layers=27, n_heads=16, d_ff=10944, norm_eps=1e-6, kv_lora_rank=512, qk_rope_head_dim=64,
                       qk_nope_head_dim=128, v_head_dim=128, n_experts=64, experts_per_token=6, expert_d_ff=1408,
                       n_shared_experts=2, moe_first_dense=1, router_renorm=False, **_DEEPSEEK_YARN,
                       rope_mscale_all_dim=0.707), 15_706_484_224, _HF + "deepseek-ai/DeepSeek-V2-Lite",
           "MLA without a query latent and 64 softmax-routed experts top-6 (not renormalised) plus two shared: "
           "2,661,150,208 active. YaRN x40 with DeepSeek's softmax correction (mscale_all_dim 0.707)."),
    *HYBRID_PRESETS,
    # 2025-26 models (issue #24), each re-derived from the published config.json in tests/data/hf_configs
    Preset(ModelConfig(name="gemma-3-27b", norm="rmsnorm", bias=False, position="rope", ffn="geglu_tanh",
                       tie_embeddings=True, vocab_size=262208, context_length=131072, d_model=5376, n_layers=62,
                       n_heads=32, n_kv_heads=16, head_dim=128, d_ff=21504, norm_eps=1e-6, norm_placement="sandwich",
                       attn_window=1024, global_every=6, qk_norm=True, embed_scale=True, attn_scale=168 ** -0.5,
                       rope_base=1000000.0, rope_scaling="linear", rope_factor=8.0, rope_local_base=10000.0),
           27_009_346_304, _HF + "google/gemma-3-27b-it (its text_config; the vision tower is not counted)",
           "Five local layers (window 1,024, RoPE base 10,000) per global one (base 10^6, linear x8); QK-norm, "
           "sandwich norms, scores scaled by 168^-0.5 (query_pre_attn_scalar), not head_dim^-0.5."),
    Preset(ModelConfig(name="llama-4-scout-17b-16e", **_LLAMA, vocab_size=202048, context_length=262144, d_model=5120,
                       n_layers=48, n_heads=40, n_kv_heads=8, d_ff=16384, nope_layers=tuple(range(4, 49, 4)),
                       layer_types=("chunked", "chunked", "chunked", "full") * 12, attn_chunk=8192, qk_norm=True,
                       qk_norm_scope="rope_heads", attn_temperature=0.1, attn_temperature_floor=8192,
                       attn_temperature_one_based=True, attn_temperature_layers="nope", rope_base=500000.0,
                       rope_scaling="llama3", rope_factor=16.0, rope_original_context=8192, rope_low_freq_factor=1.0,
                       rope_high_freq_factor=1.0, norm_eps=1e-5, n_experts=16, experts_per_token=1, expert_d_ff=8192,
                       n_shared_experts=1, router="sigmoid", router_renorm=False, router_scales_input=True,
                       aux_loss_coef=0.001), 107_769_861_120,
           _HF + "meta-llama/Llama-4-Scout-17B-16E (its text_config; the vision tower is not counted)",
           "Every 4th layer NoPE with full attention and the query temperature 1 + 0.1 ln(1 + floor((p+1)/8192)); "
           "the others rotate (llama3 x16) inside chunks of 8,192 with a gain-free QK RMS norm. 16 experts, the "
           "top-1 sigmoid weight scaling its input, plus one shared: 17,172,894,720 active."),
    Preset(ModelConfig(name="smollm3-3b", **{**_LLAMA, "tie_embeddings": True}, vocab_size=128256,
                       context_length=65536, d_model=2048, n_layers=36, n_heads=16, n_kv_heads=4, d_ff=11008,
                       norm_eps=1e-6, rope_base=5000000.0, nope_layers=tuple(range(4, 37, 4))), 3_075_098_624,
           _HF + "HuggingFaceTB/SmolLM3-3B-Base", "Llama with every 4th layer NoPE (no_rope_layer_interval 4); tied."),
    Preset(ModelConfig(name="glm-4.5-air", **_LLAMA, vocab_size=151552, context_length=131072, d_model=4096,
                       n_layers=46, n_heads=96, n_kv_heads=8, head_dim=128, qkv_bias=True, rope_base=1000000.0,
                       rope_fraction=0.5, d_ff=10944, n_experts=128, experts_per_token=8, expert_d_ff=1408,
                       n_shared_experts=1, moe_first_dense=1, router="sigmoid", router_selection_bias=True,
                       mtp_depth=1), 106_852_245_504, _HF + "zai-org/GLM-4.5-Air",
           "GQA 96 / 8 heads of 128 with q/k/v biases, half of each head rotating; DeepSeek-V3's MoE, 128 experts "
           "top-8 plus one shared: 13,424,123,904 active; one prediction module counted apart."),
    Preset(ModelConfig(name="olmo-3-7b", **_LLAMA, vocab_size=100278, context_length=65536, d_model=4096, n_layers=32,
                       n_heads=32, d_ff=11008, norm_eps=1e-6, norm_placement="post_branch", qk_norm=True,
                       qk_norm_scope="all_heads", attn_window=4096, global_every=4, rope_base=500000.0,
                       rope_local_base=500000.0, rope_scaling="yarn", rope_factor=8.0, rope_original_context=8192,
                       rope_attention_factor=1.2079441541679836), 7_298_011_136, _HF + "allenai/Olmo-3-1025-7B",
           "OLMo-2's norms after each branch and all-heads QK-norm; windows of 4,096 on three layers in four, "
           "YaRN x8 on the full layers only."),
    Preset(ModelConfig(name="ministral-3-3b", **{**_LLAMA, "tie_embeddings": True}, vocab_size=131072,
                       context_length=262144, d_model=3072, n_layers=26, n_heads=32, n_kv_heads=8, head_dim=128,
                       d_ff=9216, rope_base=1000000.0, rope_scaling="yarn", rope_factor=16.0,
                       rope_original_context=16384, rope_attention_factor=1.0, attn_temperature=0.1,
                       attn_temperature_floor=16384), 3_429_006_336,
           _HF + "mistralai/Ministral-3-3B-Instruct-2512 (its text_config; the vision tower is not counted)",
           "YaRN x16 and Llama 4's query temperature on every layer: 1 + 0.1 ln(1 + floor(p / 16,384))."),
    Preset(ModelConfig(name="jamba-v0.1", **_NOPE, vocab_size=65536, context_length=262144, d_model=4096,
                       n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336, norm_eps=1e-6,
                       layer_types=tuple("full" if i % 8 == 4 else "mamba1" for i in range(32)),
                       ffn_types=tuple("moe" if i % 2 else "dense" for i in range(32)), ssm_state=16,
                       ssm_inner=8192, ssm_dt_rank=256, ssm_dt_norm=True, n_experts=16, experts_per_token=2,
                       router_renorm=False, aux_loss_coef=0.001), 51_570_323_328, _HF + "ai21labs/Jamba-v0.1",
           "Mamba-1 in 28 of 32 layers (attention every 8th from layer 4, no positional encoding), 16 SwiGLU "
           "experts top-2 on every other layer: 12,110,311,296 active. KV cache at 256K tokens: 4 GiB in bf16."),
    Preset(ModelConfig(name="nemotron-h-8b", **_NEMOTRON, vocab_size=131072, context_length=8192, d_model=4096,
                       n_layers=52, n_heads=32, n_kv_heads=8, d_ff=21504,
                       **nemotron_layers("M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"),
                       ssm_heads=128, ssm_groups=8, ssm_chunk=128, ssm_dt_min=0.001, state_dtype="fp32"),
           8_100_852_736, _HF + "nvidia/Nemotron-H-8B-Base-8K",
           "One mixer per layer, each with its own pre-norm: 24 Mamba-2 (128 heads of 64, 8 groups, state 128), "
           "4 attention without RoPE, 24 squared-ReLU MLPs."),
    Preset(ModelConfig(name="nemotron-3-nano-30b-a3b", **_NEMOTRON, vocab_size=131072, context_length=262144,
                       d_model=2688, n_layers=52, n_heads=32, n_kv_heads=2, head_dim=128, d_ff=1856,
                       **nemotron_layers("MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"), ssm_heads=64,
                       ssm_groups=8, ssm_chunk=128, ssm_dt_min=0.001, state_dtype="fp32", n_experts=128,
                       experts_per_token=6, expert_d_ff=1856, n_shared_experts=1, shared_d_ff=3712,
                       router="sigmoid", router_selection_bias=True, routed_scale=2.5), 31_577_937_344,
           _HF + "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
           "23 Mamba-2, 6 attention (GQA 32/2, no RoPE) and 23 MoE layers: 128 squared-ReLU experts top-6, "
           "sigmoid-routed with a selection bias, plus a shared one: 3,580,073,408 active."),
    Preset(ModelConfig(name="microgpt", vocab_size=28, context_length=16, d_model=16, n_layers=1, n_heads=4,
                       norm="rmsnorm", norm_affine=False, embed_norm=True, final_norm=False,
                       ffn="relu", bias=False, position="learned", tie_embeddings=False), 4_224,
           "microgpt chapter 4 hand count (seeds/004): 448 + 256 + 448 + 1024 + 2048",
           "Pure-Python GPT on the names data set: parameter-free RMSNorm, ReLU MLP, untied head."),
    Preset(ModelConfig(name="nanogpt-handout", vocab_size=5, context_length=4, d_model=12, n_layers=1, n_heads=3,
                       bias=False, norm_bias=False, ffn="gelu", tie_embeddings=True), 1_872,
           "Architecture handout (seeds/000): tiny nanoGPT config, tied 1,872 vs untied 1,932",
           "nanoGPT with bias=False: LayerNorm gains only."),
]}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        near = difflib.get_close_matches(str(name).lower(), list(PRESETS), n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise KeyError(choice_problem("preset", name, PRESETS) + hint) from None
