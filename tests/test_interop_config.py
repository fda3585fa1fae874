"""from_hf_config / to_hf_config: published config.json files import to our presets, defaults are
transformers' defaults, every inexpressible key is named, and export round-trips."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.budget.params import count_params
from engine.config import ConfigError, ModelConfig
from engine.interop import FAMILIES, from_hf_config, to_hf_config, to_transformers
from engine.limits import MAX_LAYERS
from engine.model import build_model
from engine.presets import PRESETS
from tests.helpers import SUBPROCESS_WAIT_S

# config.json as published on the Hugging Face Hub (the generation-only keys left out)
PUBLISHED = {
    "gpt2": {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
             "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
             "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
             "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
             "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
             "summary_use_proj": True, "vocab_size": 50257},
    "llama-2-7b": {"architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
                   "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
                   "max_position_embeddings": 4096, "model_type": "llama", "num_attention_heads": 32,
                   "num_hidden_layers": 32, "num_key_value_heads": 32, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
                   "rope_scaling": None, "tie_word_embeddings": False, "torch_dtype": "float16",
                   "transformers_version": "4.31.0.dev0", "use_cache": True, "vocab_size": 32000},
    "llama-3-8b": {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
                   "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
                   "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
                   "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
                   "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
                   "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
                   "transformers_version": "4.40.0.dev0", "use_cache": True, "vocab_size": 128256},
    "mistral-7b": {"architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
                   "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
                   "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
                   "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
                   "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
                   "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 32000},
    "qwen2.5-0.5b": {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
                     "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
                     "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
                     "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
                     "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
                     "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
                     "transformers_version": "4.40.1", "use_cache": True, "use_mrope": False,
                     "use_sliding_window": False, "vocab_size": 151936},
    "qwen3-0.6b": {"architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
                   "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
                   "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
                   "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
                   "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
                   "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
                   "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
                   "use_cache": True, "use_sliding_window": False, "vocab_size": 151936},
    "gemma-2-2b": {"architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
                   "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid",
                   "eos_token_id": 1, "final_logit_softcapping": 30.0, "head_dim": 256,
                   "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304,
                   "initializer_range": 0.02, "intermediate_size": 9216, "max_position_embeddings": 8192,
                   "model_type": "gemma2", "num_attention_heads": 8, "num_hidden_layers": 26,
                   "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
                   "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32",
                   "transformers_version": "4.42.4", "use_cache": True, "vocab_size": 256000},
    "falcon-7b": {"alibi": False, "apply_residual_connection_post_layernorm": False,
                  "architectures": ["FalconForCausalLM"], "attention_dropout": 0.0, "bias": False, "bos_token_id": 11,
                  "eos_token_id": 11, "hidden_dropout": 0.0, "hidden_size": 4544, "initializer_range": 0.02,
                  "layer_norm_epsilon": 1e-05, "model_type": "falcon", "multi_query": True,
                  "new_decoder_architecture": False, "num_attention_heads": 71, "num_hidden_layers": 32,
                  "parallel_attn": True, "torch_dtype": "bfloat16", "transformers_version": "4.27.4",
                  "use_cache": True, "vocab_size": 65024},
    "pythia-160m": {"architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0,
                    "hidden_act": "gelu", "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
                    "layer_norm_eps": 1e-05, "max_position_embeddings": 2048, "model_type": "gpt_neox",
                    "num_attention_heads": 12, "num_hidden_layers": 12, "rotary_emb_base": 10000, "rotary_pct": 0.25,
                    "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.24.0",
                    "use_cache": True, "use_parallel_residual": True, "vocab_size": 50304},
}


def canonical(cfg: ModelConfig) -> dict:
    """What the model computes, independent of how the config spells it (None vs explicit defaults)."""
    d = cfg.to_dict()
    for key in ("name", "n_kv_heads", "head_dim", "d_ff", "ffn_multiple_of", "attn_window", "global_every",
                "rope_fraction", "dropout", "parallel_shared_norm"):
        d.pop(key)
    return dict(d, kv_heads=cfg.kv_heads, head_width=cfg.head_width, ffn_width=cfg.ffn_width,
                windows=cfg.layer_windows, rotary_dim=cfg.rotary_dim,
                shared_norm=cfg.block == "parallel" and cfg.parallel_shared_norm)


@pytest.mark.parametrize("preset", PUBLISHED)
def test_published_config_imports_to_our_preset(preset):
    cfg = from_hf_config(PUBLISHED[preset])
    assert count_params(cfg).total == PRESETS[preset].reference_params
    assert canonical(cfg) == canonical(PRESETS[preset].config)


@pytest.mark.parametrize("preset", [n for n in PRESETS if n in PUBLISHED or n.startswith(("gpt2", "llama"))])
def test_export_round_trips(preset):
    cfg = PRESETS[preset].config
    model_type, d = to_hf_config(cfg)
    back = from_hf_config({"model_type": model_type, **d})
    assert canonical(back) == canonical(cfg)
    assert to_hf_config(back) == (model_type, d)


@pytest.mark.parametrize("family", FAMILIES)
def test_missing_keys_mean_transformers_defaults(family):
    transformers = pytest.importorskip("transformers", minversion="5.0")
    # DeepseekV2Config and Dots1Config have no default top-k or expert count (their routers cannot run without
    # them; the refusals are tested apart), and Glm4MoeConfig's default head (4096 / 96 = 42 wide, half of it
    # rotating) turns an odd 21 dimensions, so those keys are given
    given = {"deepseek_v2": {"num_experts_per_tok": 6}, "dots1": {"n_routed_experts": 8, "num_experts_per_tok": 2},
             "glm4_moe": {"head_dim": 128}}.get(family, {})
    ours = from_hf_config({"model_type": family, **given})
    full = from_hf_config(transformers.AutoConfig.for_model(family, **given).to_dict())
    assert ours.replace(name=full.name) == full


def _problems(d):
    with pytest.raises(ConfigError) as e:
        from_hf_config(d)
    return e.value.problems


def test_a_per_layer_list_longer_than_any_model_is_refused_by_its_length():
    """Refused for its size before any reader walks it, naming the key and the limit."""
    n = MAX_LAYERS + 1
    assert _problems({"model_type": "qwen2", "num_hidden_layers": 2, "layer_types": ["full_attention"] * n}) == \
        [f"layer_types: {n:,} entries is more than the engine models (at most {MAX_LAYERS:,})"]


@pytest.mark.parametrize("key,config", [
    ("num_hidden_layers", lambda n: {"model_type": "llama", "num_hidden_layers": n}),
    ("n_layer", lambda n: {"model_type": "gpt2", "n_layer": n}),
    ("text_config.num_hidden_layers", lambda n: {"model_type": "gemma3", "text_config": {"num_hidden_layers": n}}),
])
def test_a_layer_count_above_the_engines_limit_is_refused_at_its_key(key, config):
    """One layer more than the engine walks is refused by name before any reader builds a per-layer list; the
    limit itself imports."""
    assert _problems(config(MAX_LAYERS + 1)) == [
        f"{key}: {MAX_LAYERS + 1:,} layers is more than the engine models (at most {MAX_LAYERS:,})"]
    assert from_hf_config(config(MAX_LAYERS)).n_layers == MAX_LAYERS


@pytest.mark.parametrize("config,key", [
    ({"model_type": "bert"}, "model_type"),
    # scaled RoPE imports now (tests/test_rope_scaling.py); a type or a parameter we do not model is refused
    ({"model_type": "llama", "rope_scaling": {"rope_type": "proportional", "factor": 8.0}}, "rope_scaling.rope_type"),
    ({"model_type": "llama", "rope_parameters": {"rope_type": "linear", "factor": 2.0, "mrope_section": [2, 2]}},
     "rope_parameters.mrope_section"),
    ({"model_type": "llama", "rope_parameters": {"rope_type": "linear"}}, "rope_parameters.factor"),
    ({"model_type": "llama", "partial_rotary_factor": 0.5}, "partial_rotary_factor"),
    ({"model_type": "llama", "attention_bias": True}, "attention_bias"),
    ({"model_type": "llama", "attention_dropout": 0.1}, "attention_dropout"),
    ({"model_type": "llama", "hidden_act": "gelu_fast"}, "hidden_act"),
    ({"model_type": "llama", "quantization_config": {"quant_method": "hqq"}}, "quantization_config"),
    ({"model_type": "qwen3", "attention_bias": True}, "attention_bias"),
    # irregular full/sliding patterns and query_pre_attn_scalar != head_dim import now (layer_types, attn_scale:
    # tests/test_interop_families.py); an unknown layer type or a non-positive scalar is refused
    ({"model_type": "qwen2", "num_hidden_layers": 2, "layer_types": ["full_attention", "chunked_attention"]},
     "layer_types"),
    ({"model_type": "gemma2", "head_dim": 128, "query_pre_attn_scalar": 0}, "query_pre_attn_scalar"),
    ({"model_type": "gemma", "hidden_activation": "relu"}, "hidden_activation"),
    ({"model_type": "gpt2", "scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
    ({"model_type": "gpt2", "resid_pdrop": 0.0}, "resid_pdrop"),
    ({"model_type": "gpt_neox", "attention_bias": False}, "attention_bias"),
    ({"model_type": "falcon", "alibi": True}, "alibi"),
    ({"model_type": "falcon", "new_decoder_architecture": True, "parallel_attn": False}, "parallel_attn"),
    ({"model_type": "falcon", "hidden_dropout": 0.1}, "hidden_dropout"),
])
def test_inexpressible_keys_are_named(config, key):
    assert any(p.startswith(key) for p in _problems(config)), _problems(config)


def test_all_problems_at_once_and_not_a_dict():
    problems = _problems({"model_type": "falcon", "alibi": True, "bias_typo": 1, "hidden_dropout": 0.2})
    assert [p.split(":")[0] for p in problems] == ["alibi", "hidden_dropout", "bias_typo"]
    assert "JSON object" in _problems([1, 2])[0]
    assert "wrong type or value" in _problems({"model_type": "llama", "num_attention_heads": 0})[0]
    assert "wrong type or value" in _problems({"model_type": "gpt_neox", "hidden_size": "big"})[0]
    # our validation, of a head width no one key sets (hidden_size // num_attention_heads)
    assert _problems({"model_type": "llama", "hidden_size": 33})[0].startswith("config.json: head_dim")
    assert _problems({"model_type": "gpt_neox", "rotary_pct": 0.01})[0].startswith("rotary_pct")


def test_legacy_spellings_read_like_transformers():
    assert from_hf_config({"model_type": "llama", "rope_theta": 5e5}).rope_base == 5e5
    assert from_hf_config({"model_type": "falcon", "n_embed": 64, "num_attention_heads": 4}).d_model == 64
    gemma = from_hf_config({"model_type": "gemma", "hidden_act": "gelu", "hidden_activation": None})
    assert gemma.ffn == "geglu_tanh"   # the Gemma releases say "gelu" and mean the tanh approximation
    qwen = from_hf_config({"model_type": "qwen2", "num_hidden_layers": 4, "use_sliding_window": False,
                           "sliding_window": 128, "layer_types": ["sliding_attention"] * 4})
    assert qwen.attn_window is None   # transformers drops the window unless use_sliding_window


def test_gemma2_alternation_is_global_every_2():
    cfg = from_hf_config({"model_type": "gemma2", "num_hidden_layers": 4, "sliding_window": 7})
    assert cfg.layer_windows == [7, None, 7, None] and cfg.global_every == 2


@pytest.mark.parametrize("ffn,act", [("swiglu", "silu"), ("geglu", "gelu"), ("geglu_tanh", "gelu_pytorch_tanh")])
def test_gemma2_export_writes_the_activation_transformers_reads(ffn, act):
    """Gemma2Config reads hidden_activation (default gelu_pytorch_tanh): a writer that left it out would export a
    SwiGLU model as a tanh-GELU one. Checked on transformers' own config class."""
    from transformers import Gemma2Config
    cfg = from_hf_config({"model_type": "gemma2", "num_hidden_layers": 2, "sliding_window": 7}).replace(ffn=ffn)
    family, d = to_hf_config(cfg, "gemma2")
    assert family == "gemma2" and Gemma2Config(**d).hidden_activation == act
    assert from_hf_config({"model_type": family, **d}).ffn == ffn


def test_post_norm_with_gqa_is_not_expressible():
    cfg = PRESETS["llama-3-8b"].config.replace(norm_placement="post")
    with pytest.raises(ConfigError) as e:
        to_hf_config(cfg)
    assert "closest is llama" in e.value.problems[0]
    assert any(p.startswith("norm_placement: 'post'") for p in e.value.problems)
    assert to_hf_config(PRESETS["falcon-7b"].config.replace(block="serial"))[0] == "falcon"   # serial MQA: classic
    with pytest.raises(ConfigError, match="n_kv_heads"):
        to_hf_config(PRESETS["falcon-7b"].config.replace(n_heads=8, head_dim=568, n_kv_heads=2, block="serial"),
                     model_type="falcon")
    with pytest.raises(ConfigError, match="model_type"):
        to_hf_config(cfg, model_type="bert")


def test_to_transformers_reports_post_norm_with_gqa():
    tiny = ModelConfig(name="post-gqa", vocab_size=50, context_length=32, d_model=32, n_layers=1, n_heads=4,
                       n_kv_heads=2, norm="rmsnorm", norm_bias=False, bias=False, position="rope", ffn="swiglu",
                       d_ff=48, tie_embeddings=False, norm_placement="post")
    with pytest.raises(ConfigError) as e:
        to_transformers(build_model(tiny))
    assert any(p.startswith("norm_placement: 'post' is not expressible in llama") for p in e.value.problems)


@pytest.mark.process
def test_import_hf_runs_without_transformers(tmp_path):
    """The YAML import is pure stdlib + engine: a real `python -m engine import-hf` never imports transformers."""
    (tmp_path / "config.json").write_text(json.dumps(PUBLISHED["llama-3-8b"]))
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "engine", "import-hf", str(tmp_path)],
                       capture_output=True, text=True, timeout=SUBPROCESS_WAIT_S)
    assert r.returncode == 0, r.stderr[-2000:]
    assert count_params(ModelConfig.from_yaml(r.stdout)).total == PRESETS["llama-3-8b"].reference_params
    imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time")}
    assert "engine.interop.hf_config" in imported
    assert not {m for m in imported if m.split(".")[0] == "transformers"}


def test_the_imported_name_is_the_models_own_even_with_a_trailing_slash():
    """`_name_or_path` "meta-llama/Llama-3.1-8B/" names the config Llama-3.1-8B, the model's own name."""
    d = json.loads((Path(__file__).parent / "data" / "hf_configs" / "llama3_1_8b.json").read_text())
    assert from_hf_config({**d, "_name_or_path": "meta-llama/Llama-3.1-8B/"}).name == "Llama-3.1-8B"
    assert from_hf_config({**d, "_name_or_path": "Llama-3.1-8B"}).name == "Llama-3.1-8B"
    assert from_hf_config({**d, "_name_or_path": " "}).name == "llama"   # blank: the family names it
