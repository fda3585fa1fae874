"""to_hf_config's refusals, message by message: each family writer names every field of a config it cannot express,
with the value and the reason, in a fixed order; the error leads with the closest family."""
import pytest

from engine.config import ConfigError, ModelConfig
from engine.interop import from_hf_config, to_hf_config
from engine.interop.hf_export import hf_problems

# a valid config that no family can express: post-norm, no final norm, an embedding norm, a head bias, scaled
# logits, GQA with a window, dropout, learned positions, ReGLU
ODD = ModelConfig(name="odd", vocab_size=61, context_length=32, d_model=32, n_layers=2, n_heads=4, d_ff=48,
                  norm="rmsnorm", norm_placement="post", position="learned", ffn="reglu", bias=True, qkv_bias=True,
                  dropout=0.1, n_kv_heads=2, attn_window=8, final_norm=False, embed_norm=True, head_bias=True,
                  logit_scale=0.5)

_SHARED = [("norm_placement", "'post'", ""), ("final_norm", "False", ""), ("embed_norm", "True", ""),
           ("head_bias", "True", "no bias on the output head"), ("logit_scale", "0.5", "logits are not rescaled")]
_LAYERNORM = [("norm", "'rmsnorm'", ""), *_SHARED[:3], ("norm_bias", "None", "its LayerNorms have a bias"),
              *_SHARED[3:], ("attn_window", "8", "no sliding window")]
_DROPOUT = ("dropout", "0.1", "dropout only on attention probabilities")
_FFN = ("ffn", "'reglu'", "supported: gelu, gelu_tanh, relu, silu")
_LEARNED = ("position", "'learned'", "")
EXPECTED = {
    "llama": [*_SHARED, ("attn_window", "8", "no sliding window"), _DROPOUT, _LEARNED],
    "qwen3": [*_SHARED, ("qk_norm", "False", ""), _DROPOUT, ("bias", "True", ""),
              ("qkv_bias", "True", "Qwen2 always has q, k, v biases; Qwen3 has none"), _LEARNED],
    "gpt_neox": [*_LAYERNORM, ("n_kv_heads", "2", "one key/value head per query head"), _FFN, _LEARNED],
    "falcon": [*_LAYERNORM, _DROPOUT, ("n_kv_heads", "2", "a serial Falcon block has MHA or MQA only"), _FFN,
               _LEARNED],
    "llama4_text": [*_SHARED, _DROPOUT, ("bias", "True", ""), ("qkv_bias", "True", ""),
                    ("attn_window", "8", "Llama 4's local layers are chunked, not sliding"), _LEARNED],
    # MiniMax-01 is post-norm with an embedding norm and no final norm (engine/interop/hf_minimax.py): ODD's layout
    "minimax": [*_SHARED[3:], ("ffn", "'reglu'", "lightning attention applies hidden_act to q, k, v; ours is SiLU"),
                ("bias", "True", ""), ("qkv_bias", "True", ""),
                ("layer_types", "None", "each layer is lightning or softmax attention, the window (if any) on every "
                                        "attention layer"), ("n_experts", "None", "minimax is a mixture of experts"),
                _DROPOUT, _LEARNED],
}


def _messages(family, problems):
    return [f"{field}: {value} is not expressible in {family}" + (f" ({why})" if why else "")
            for field, value, why in problems]


@pytest.mark.parametrize("family", EXPECTED)
def test_each_writer_names_every_field_it_cannot_express(family):
    assert hf_problems(ODD, family)[1] == _messages(family, EXPECTED[family])


def test_the_error_leads_with_the_closest_family():
    with pytest.raises(ConfigError) as e:
        to_hf_config(ODD)
    lead = "odd: no Hugging Face family we support computes this model; closest is llama:"   # 8 problems, minimax 9
    assert e.value.problems == [lead, *_messages("llama", EXPECTED["llama"])]


def test_mistral_needs_the_window_on_every_layer():
    cfg = ModelConfig(vocab_size=61, context_length=32, d_model=32, n_layers=2, n_heads=4, d_ff=48, norm="rmsnorm",
                      position="rope", ffn="swiglu", bias=False, attn_window=8, global_every=2)
    assert hf_problems(cfg, "mistral")[1] == _messages(
        "mistral", [("global_every", "2", "the window applies to every layer")])
    cfg = cfg.replace(global_every=None, layer_types=("sliding", "full"))
    assert hf_problems(cfg, "mistral")[1] == _messages(
        "mistral", [("layer_types", "('sliding', 'full')", "the window applies to every layer")])


def test_an_unknown_family_is_named_with_the_ones_we_write():
    with pytest.raises(ConfigError) as e:
        to_hf_config(ODD, "bert")
    assert e.value.problems[0].startswith("model_type: 'bert' is not one of llama, mistral, qwen2, qwen3, gemma")


def test_neox_needs_two_norms_in_a_parallel_block():
    neox = from_hf_config({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 4,
                           "num_hidden_layers": 2, "intermediate_size": 256, "vocab_size": 100})
    assert neox.block == "parallel" and hf_problems(neox, "gpt_neox")[1] == []
    shared = neox.replace(parallel_shared_norm=True)
    assert hf_problems(shared, "gpt_neox")[1] == _messages(
        "gpt_neox", [("parallel_shared_norm", "True", "NeoX has two norms")])


@pytest.mark.parametrize("tied", [True, False])
def test_falcon_writes_whether_the_head_is_tied(tied):
    """Falcon's config class ties the head by default: an untied model must say so, or its head is lost."""
    cfg = from_hf_config({"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                          "vocab_size": 100, "tie_word_embeddings": tied})
    family, d = to_hf_config(cfg, "falcon")
    assert d["tie_word_embeddings"] is tied
    assert from_hf_config({"model_type": family, **d}).replace(name=cfg.name) == cfg
