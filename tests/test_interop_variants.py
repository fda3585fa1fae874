"""The structural switches of the older families, read as transformers reads them: Falcon's classic and new blocks
(multi_query, parallel_attn, num_ln_in_parallel_attn), GPT-NeoX's serial block and theta keys, Phi's head
counts, Qwen's window layers, BLOOM's spellings; and the exact message of every refusal of every dense family (the HF
key, its value, and why)."""
import pytest

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.config import ConfigError, ModelConfig  # noqa: E402
from engine.interop import from_hf_config, from_transformers, hf_model_from_config, logits_gap, scramble_  # noqa: E402
from engine.interop.hf_config import NEUTRAL, import_hf_config  # noqa: E402

transformers.logging.set_verbosity_error()
_IDS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)
_SIZES = dict(vocab_size=61, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=32,
              **_IDS)

# (model_type, HF config, fields our import must have): each also matches transformers' logits
CASES = {
    # classic Falcon, serial (parallel_attn false), one key/value head per query head
    "falcon_serial_mha": ("falcon", dict(_SIZES, parallel_attn=False, multi_query=False, layer_norm_epsilon=0.5),
                          dict(block="serial", n_kv_heads=None, norm_eps=0.5, parallel_shared_norm=False)),
    # classic parallel block saying its one norm out loud
    "falcon_parallel_one_norm": ("falcon", dict(_SIZES, num_ln_in_parallel_attn=1),
                                 dict(block="parallel", n_kv_heads=1, parallel_shared_norm=True)),
    # new decoder architecture with one shared norm and as many key/value heads as query heads
    "falcon_new_one_norm": ("falcon", dict(_SIZES, new_decoder_architecture=True, num_kv_heads=4,
                                           num_ln_in_parallel_attn=1),
                            dict(block="parallel", n_kv_heads=None, parallel_shared_norm=True)),
    "falcon_new_two_norms": ("falcon", dict(_SIZES, new_decoder_architecture=True, num_kv_heads=2),
                             dict(block="parallel", n_kv_heads=2, parallel_shared_norm=False)),
    "gpt_neox_serial": ("gpt_neox", dict(_SIZES, intermediate_size=48, use_parallel_residual=False),
                        dict(block="serial", norm="layernorm", bias=True)),
    "phi_mha_spelled_out": ("phi", dict(_SIZES, intermediate_size=48, num_key_value_heads=4),
                            dict(n_kv_heads=None, block="parallel", norm="layernorm", bias=True)),
}


@pytest.mark.parametrize("name", CASES)
def test_variants_import_to_the_function_transformers_computes(name):
    model_type, config, fields = CASES[name]
    hf = hf_model_from_config(model_type, config, attn_implementation="eager").eval()
    scramble_(hf, seed=0)
    cfg = from_hf_config({"model_type": model_type, **config})
    assert {k: getattr(cfg, k) for k in fields} == fields
    ours = from_transformers(hf)
    assert ours.cfg == cfg
    assert logits_gap(hf, ours, tokens=12) < 1e-5
    # head_dim spelled out as these families fix it (hidden_size // num_attention_heads) changes nothing
    assert from_hf_config({"model_type": model_type, **config, "head_dim": 8}) == cfg


@pytest.mark.parametrize("use,max_window_layers", [(True, 2), (True, 0), (False, 2)])
def test_qwen2_window_layers_follow_transformers(use, max_window_layers):
    config = dict(num_hidden_layers=4, use_sliding_window=use, sliding_window=6, max_window_layers=max_window_layers)
    types = transformers.AutoConfig.for_model("qwen2", **config).layer_types   # the reference
    cfg = from_hf_config({"model_type": "qwen2", **config})
    assert cfg.layer_windows == [6 if use and t == "sliding_attention" else None for t in types]
    assert cfg.layer_windows == {(True, 2): [None, None, 6, 6], (True, 0): [6] * 4, (False, 2): [None] * 4}[
        (use, max_window_layers)]


def test_gpt_neox_reads_its_theta_from_rotary_emb_base_only():
    for config in ({"rotary_emb_base": 5000.0}, {"rope_theta": 5000.0}, {"rotary_emb_base": 500.0, "rope_theta": 5.0}):
        expected = transformers.AutoConfig.for_model("gpt_neox", **config).rope_parameters["rope_theta"]
        cfg, ignored = import_hf_config({"model_type": "gpt_neox", **config})
        assert cfg.rope_base == expected == config.get("rotary_emb_base", 10000.0)
        assert ignored == (["rope_theta: GPT-NeoX reads rotary_emb_base"] if "rope_theta" in config else [])


def test_bloom_reads_every_spelling_transformers_accepts():
    """n_embed for hidden_size, num_hidden_layers / num_attention_heads for n_layer / n_head; seq_length (the
    training length, 2048 when absent) as the context; a 4x tanh-GELU MLP, an embedding LayerNorm, ALiBi."""
    d = {"vocab_size": 61, "n_embed": 96, "num_hidden_layers": 3, "num_attention_heads": 4, "seq_length": 100,
         "layer_norm_epsilon": 0.5}
    ref = transformers.AutoConfig.for_model("bloom", **d)
    cfg = from_hf_config({"model_type": "bloom", **d})
    assert (cfg.d_model, cfg.n_layers, cfg.n_heads) == (ref.hidden_size, ref.n_layer, ref.n_head) == (96, 3, 4)
    assert cfg == ModelConfig.from_dict({**NEUTRAL, "name": "bloom", "vocab_size": 61, "context_length": 100,
                                         "d_model": 96, "n_layers": 3, "n_heads": 4, "d_ff": 384, "ffn": "gelu_tanh",
                                         "norm": "layernorm", "norm_eps": 0.5, "position": "alibi", "bias": True,
                                         "embed_norm": True, "tie_embeddings": ref.tie_word_embeddings})
    assert from_hf_config({"model_type": "bloom"}).context_length == 2048


def test_bloom_given_both_spellings_counts_the_alias_as_transformers_does():
    """BloomConfig sets its attribute_map aliases (num_hidden_layers, num_attention_heads) after n_layer, n_head."""
    d = {"n_embed": 64, "n_layer": 2, "num_hidden_layers": 3, "n_head": 4, "num_attention_heads": 8}
    ref = transformers.AutoConfig.for_model("bloom", **d)
    cfg = from_hf_config({"model_type": "bloom", **d})
    assert (cfg.n_layers, cfg.n_heads) == (ref.n_layer, ref.n_head) == (3, 8)


def _problems(d):
    with pytest.raises(ConfigError) as e:
        from_hf_config(d)
    return e.value.problems


@pytest.mark.parametrize("config,problems", [
    # the shared reader: the Llama-like sizes, activations, unknown keys, per-layer types
    ({"model_type": "llama", "attention_dropout": 0.1, "hidden_act": "gelu_fast", "foo": 1},
     ["attention_dropout: 0.1 is not expressible (our dropout also acts on the residual stream)",
      "hidden_act: 'gelu_fast' is not expressible (supported activations: silu, swish, gelu, gelu_pytorch_tanh, "
      "gelu_new, relu)",
      "foo: unknown llama config key; refusing to guess what it changes"]),
    ({"model_type": "qwen2", "num_hidden_layers": 2, "layer_types": ["full_attention"]},
     ["layer_types: ['full_attention'] is not expressible (2 entries of sliding_attention / full_attention)"]),
    ({"model_type": "qwen2", "use_mrope": True},
     ["use_mrope: True is not expressible (multimodal RoPE sections are not modelled)"]),
    ({"model_type": "qwen3", "attention_bias": True},
     ["attention_bias: True is not expressible (Qwen3 puts it on q, k, v and o but not the MLP)"]),
    ({"model_type": "gpt_neox", "attention_bias": False},
     ["attention_bias: False is not expressible (the NeoX MLP always has biases; our `bias` covers both)"]),
    ({"model_type": "gpt_neox", **_SIZES, "head_dim": 16},
     ["head_dim: 16 is not expressible (gpt_neox heads are hidden_size // num_attention_heads)"]),
    # transformers refuses both: `hidden_size` must be divisible by num_heads
    ({"model_type": "falcon", **_SIZES, "hidden_size": 30},
     ["num_attention_heads: 4 is not expressible (falcon needs hidden_size (30) to be a multiple of it)"]),
    ({"model_type": "gpt_neox", **_SIZES, "hidden_size": 38, "rotary_pct": 0.5},
     ["num_attention_heads: 4 is not expressible (gpt_neox needs hidden_size (38) to be a multiple of it)"]),
    # and the head width it would have (14 // 4 = 3) is what the rotary share applies to: int(3 * 0.3) = 0
    ({"model_type": "gpt_neox", **_SIZES, "hidden_size": 14, "rotary_pct": 0.3},
     ["num_attention_heads: 4 is not expressible (gpt_neox needs hidden_size (14) to be a multiple of it)",
      "rotary_pct: 0.3 is not expressible (rotates no dimension of the head)"]),
    ({"model_type": "falcon", "alibi": True, "apply_residual_connection_post_layernorm": True},
     ["alibi: True is not expressible (ALiBi position biases are not modelled; we use RoPE)",
      "apply_residual_connection_post_layernorm: True is not expressible (the residual is the block input)"]),
    ({"model_type": "falcon", "hidden_dropout": 1, "attention_dropout": 1.0},
     ["hidden_dropout: 1 is not expressible (Falcon places dropout differently from our one dropout)",
      "attention_dropout: 1.0 is not expressible (Falcon places dropout differently from our one dropout)"]),
    ({"model_type": "falcon", "new_decoder_architecture": True, "parallel_attn": False},
     ["parallel_attn: False is not expressible (new_decoder_architecture blocks are parallel)"]),
    ({"model_type": "falcon", "num_ln_in_parallel_attn": 2},
     ["num_ln_in_parallel_attn: 2 is not expressible (the classic parallel block has one shared norm)"]),
    ({"model_type": "bloom", "apply_residual_connection_post_layernorm": True, "hidden_dropout": 1,
      "attention_dropout": 1.0},
     ["apply_residual_connection_post_layernorm: True is not expressible (the residual is the block input)",
      "hidden_dropout: 1 is not expressible (BLOOM places dropout differently from our one dropout)",
      "attention_dropout: 1.0 is not expressible (BLOOM places dropout differently from our one dropout)"]),
    ({"model_type": "llama", "attention_bias": True},
     ["attention_bias: True is not expressible (with mlp_bias=False: our `bias` covers attention and MLP alike)"]),
    ({"model_type": "gemma", "attention_bias": True, "use_bidirectional_attention": True, "hidden_act": "gelu",
      "hidden_activation": "relu"},
     ["attention_bias: True is not expressible (Gemma puts it on q, k, v and o but not the MLP)",
      "use_bidirectional_attention: True is not expressible (the model is causal)",
      "hidden_activation: 'relu' is not expressible (disagrees with hidden_act='gelu' (geglu_tanh), which "
      "transformers 5 uses)"]),
    ({"model_type": "gemma2", "query_pre_attn_scalar": -1},
     ["query_pre_attn_scalar: -1 is not expressible (scores are scaled by its inverse square root)"]),
    ({"model_type": "gpt2", "scale_attn_weights": False, "scale_attn_by_inverse_layer_idx": True,
      "add_cross_attention": True, "resid_pdrop": 0.0},
     ["scale_attn_weights: False is not expressible (scores are always scaled by 1/sqrt(head_dim))",
      "scale_attn_by_inverse_layer_idx: True is not expressible (no per-layer score scaling)",
      "add_cross_attention: True is not expressible (decoder-only)",
      "resid_pdrop: 0.0 is not expressible (our one dropout needs resid_pdrop = embd_pdrop = attn_pdrop; "
      "embd_pdrop=0.1, attn_pdrop=0.1)"]),
    ({"model_type": "stablelm", "qk_layernorm": True, "hidden_dropout": 1, "attention_dropout": 1.0},
     ["qk_layernorm: True is not expressible (StableLM's QK-norm has separate weights for every head)",
      "hidden_dropout: 1 is not expressible (StableLM drops only the MLP output; our one dropout acts everywhere)",
      "attention_dropout: 1.0 is not expressible (StableLM drops only the MLP output; our one dropout acts "
      "everywhere)"]),
    ({"model_type": "starcoder2", "residual_dropout": 0.1},
     ["residual_dropout: 0.1 is not expressible (our one dropout needs residual_dropout = embedding_dropout = "
      "attention_dropout; embedding_dropout=0.0, attention_dropout=0.0)"]),
    ({"model_type": "phi3", "resid_pdrop": 0.1},
     ["resid_pdrop: 0.1 is not expressible (our one dropout needs resid_pdrop = embd_pdrop = attention_dropout; "
      "embd_pdrop=0.0, attention_dropout=0.0)"]),
    ({"model_type": "olmo2", "attention_bias": True},
     ["attention_bias: True is not expressible (OLMo-2 puts it on q, k, v and o but not the MLP)"]),
    ({"model_type": "cohere", "use_qk_norm": True, "attention_bias": True, "attention_dropout": 1},
     ["use_qk_norm: True is not expressible (Cohere's QK-norm is a LayerNorm with weights for every head)",
      "attention_bias: True is not expressible (Cohere puts it on q, k, v and o but not the MLP)",
      "attention_dropout: 1 is not expressible (our dropout also acts on the residual stream)"]),
    ({"model_type": "mpt", "n_heads": 6, "d_model": 36, "attn_config": {"clip_qkv": 8}},
     ["n_heads: 6 is not expressible (MPT orders the ALiBi slopes of non-power-of-two head counts unlike BLOOM; "
      "only powers of two are modelled)",
      "attn_config.clip_qkv: 8 is not expressible (clamping q, k, v is not modelled)"]),
    ({"model_type": "mpt", "attn_config": [1]}, ["attn_config: [1] is not expressible (expected a mapping)"]),
    ({"model_type": "phi", "qk_layernorm": True},
     ["qk_layernorm: True is not expressible (Phi's QK-norm is a LayerNorm with a bias per head dimension)"]),
])
def test_refusals_name_the_key_the_value_and_why(config, problems):
    assert _problems(config) == problems


def test_a_value_of_the_wrong_json_type_is_shown_up_to_40_characters():
    whole, cut = "x" * 38, "y" * 39   # their reprs are 40 and 41 characters long
    assert _problems({"model_type": "llama", "hidden_size": whole, "vocab_size": cut}) == [
        f"hidden_size: '{whole}' has the wrong type or value (expected an integer)",
        f"vocab_size: '{'y' * 36}... has the wrong type or value (expected an integer)"]


def test_mpt_reads_only_what_transformers_reads_of_attn_config():
    cfg, ignored = import_hf_config({"model_type": "mpt", "d_model": 64, "n_heads": 4, "expansion_ratio": 4,
                                     "layer_norm_epsilon": 0.5,
                                     "attn_config": {"softmax_scale": 0.5, "attn_pdrop": 0.1}})
    # transformers' MPT: a 4x exact-GELU MLP, LayerNorms without bias, ALiBi, no linear biases
    assert (cfg.attn_scale, cfg.dropout, cfg.d_ff, cfg.ffn, cfg.norm_eps, cfg.norm_bias, cfg.position, cfg.bias) == \
        (0.5, 0.1, 4 * 64, "gelu", 0.5, False, "alibi", False)
    assert ignored == ["expansion_ratio: transformers' MPT does not read it"]
    # the default scale spelled out, 1 / sqrt(64 / 4), is no custom scale
    assert from_hf_config({"model_type": "mpt", "d_model": 64, "n_heads": 4,
                           "attn_config": {"softmax_scale": 0.25}}).attn_scale is None
    assert from_hf_config({"model_type": "mpt", "d_model": 16, "n_heads": 1}).n_heads == 1   # 2^0 is a power of two


def test_gpt_bigcode_multi_query_is_one_key_value_head():
    assert from_hf_config({"model_type": "gpt_bigcode"}).n_kv_heads == 1   # multi_query defaults to true
    assert from_hf_config({"model_type": "gpt_bigcode", "multi_query": False}).n_kv_heads is None


def test_cohere_head_counts_spelled_out_change_nothing():
    d = {"model_type": "cohere", "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 48}
    cfg = from_hf_config(d)
    assert cfg.n_kv_heads is None and cfg.head_dim is None
    assert from_hf_config(dict(d, num_key_value_heads=4, head_dim=8)) == cfg


def test_gpt2_and_bigcode_sizes_read_like_transformers():
    d = {"n_embd": 32, "n_head": 4, "n_inner": 40, "activation_function": "relu", "layer_norm_epsilon": 0.5}
    cfg = from_hf_config({"model_type": "gpt2", **d})
    assert (cfg.d_ff, cfg.ffn, cfg.norm_eps) == (40, "relu", 0.5)
    assert from_hf_config({"model_type": "gpt2", "n_embd": 32, "n_head": 4}).d_ff == 4 * 32   # n_inner null: 4 d
    # precision switches GPTBigCodeConfig reads (so not listed as unread); no effect on what is computed
    flags = {"attention_softmax_in_fp32": True, "scale_attention_softmax_in_fp32": True}
    assert import_hf_config({"model_type": "gpt_bigcode", **flags}) == \
        (from_hf_config({"model_type": "gpt_bigcode"}), [])


@pytest.mark.parametrize("family", ["stablelm", "starcoder2"])
def test_head_counts_spelled_out_change_nothing(family):
    d = {"model_type": family, "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 48}
    cfg = from_hf_config(d)
    assert cfg.n_kv_heads == 2 and cfg.head_dim is None
    assert from_hf_config(dict(d, head_dim=8)) == cfg
    assert from_hf_config(dict(d, num_key_value_heads=4)).n_kv_heads is None


# 100 // 6 = 16: transformers' head_dim (hidden_size // num_attention_heads) when the heads do not divide hidden_size
_UNEVEN = dict(_SIZES, hidden_size=100, num_attention_heads=6, num_key_value_heads=6)


@pytest.mark.parametrize("family", ["stablelm", "starcoder2", "phi", "cohere"])
def test_uneven_heads_rotate_a_share_of_the_floor_head_width(family):
    ref = transformers.AutoConfig.for_model(family, **_UNEVEN)
    head = ref.hidden_size // ref.num_attention_heads
    rotary = int(head * ref.rope_parameters.get("partial_rotary_factor", 1.0))   # transformers truncates
    cfg = from_hf_config({"model_type": family, **_UNEVEN})
    assert (cfg.head_width, cfg.rope_fraction) == (head, rotary / head)


def test_mpt_softmax_scale_of_the_floor_head_width_is_the_default():
    """MptAttention's default softmax_scale is 1 / sqrt(d_model // n_heads)."""
    def scale(s):
        return from_hf_config({"model_type": "mpt", "vocab_size": 61, "d_model": 100, "n_heads": 8, "n_layers": 2,
                               "max_seq_len": 32, "attn_config": {"softmax_scale": s}}).attn_scale
    assert (scale((100 // 8) ** -0.5), scale(0.25)) == (None, 0.25)


def test_gemma2_scores_scale_by_query_pre_attn_scalar_to_the_minus_half():
    """Gemma2Attention: scaling = query_pre_attn_scalar ** -0.5; the head width's own value is the default."""
    def scale(s):
        return from_hf_config({"model_type": "gemma2", **_UNEVEN, "head_dim": 16, "query_pre_attn_scalar": s}).attn_scale
    assert (scale(16), scale(1), scale(4)) == (None, 1.0, 0.5)


@pytest.mark.parametrize("acts,ffn", [
    (dict(hidden_act="silu"), "swiglu"),
    (dict(hidden_act="gelu", hidden_activation="gelu_pytorch_tanh"), "geglu_tanh"),
    (dict(hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh"), "geglu_tanh"),
])
def test_gemma_gates_with_hidden_act_and_accepts_an_agreeing_hidden_activation(acts, ffn):
    assert from_hf_config({"model_type": "gemma", **_SIZES, "num_key_value_heads": 4, **acts}).ffn == ffn


def test_uneven_gpt_neox_heads_are_one_problem_even_with_the_floor_head_dim():
    assert _problems({"model_type": "gpt_neox", "hidden_size": 100, "num_attention_heads": 6, "head_dim": 16}) == [
        "num_attention_heads: 6 is not expressible (gpt_neox needs hidden_size (100) to be a multiple of it)"]


def test_gemma3_pattern_key_wins_over_its_private_spelling_as_in_transformers():
    d = dict(_SIZES, num_hidden_layers=6, sliding_window_pattern=3, _sliding_window_pattern=2)
    ref = transformers.AutoConfig.for_model("gemma3_text", **d)
    cfg = from_hf_config({"model_type": "gemma3_text", **d})
    assert [w is None for w in cfg.layer_windows] == [t == "full_attention" for t in ref.layer_types]
    assert cfg.global_every == 3
