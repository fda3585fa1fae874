"""Issue #2 acceptance: each real-model preset, exported with to_hf_config and built by Hugging Face
transformers on the meta device (no memory, no download), has exactly the preset's reference count; so do
our closed form and our own meta-built model."""
import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.params import count_params  # noqa: E402
from engine.interop import to_hf_config  # noqa: E402
from engine.model import build_model  # noqa: E402
from engine.presets import PRESETS  # noqa: E402

transformers.logging.set_verbosity_error()

FAMILY = {"gpt2": "gpt2", "llama-2-7b": "llama", "llama-3-8b": "llama", "mistral-7b": "mistral",
          "qwen2.5-0.5b": "qwen2", "qwen3-0.6b": "qwen3", "gemma-2-2b": "gemma2", "falcon-7b": "falcon",
          "pythia-160m": "gpt_neox"}


@pytest.mark.parametrize("name", FAMILY)
def test_transformers_meta_count_equals_reference(name):
    preset = PRESETS[name]
    model_type, config = to_hf_config(preset.config)
    assert model_type == FAMILY[name]
    hf_config = transformers.AutoConfig.for_model(model_type, **config)
    with torch.device("meta"):
        hf = transformers.AutoModelForCausalLM.from_config(hf_config)
    hf_count = sum(p.numel() for p in hf.parameters())   # a tied matrix is one Parameter, counted once
    assert hf_count == preset.reference_params
    assert count_params(preset.config).total == hf_count
    assert sum(p.numel() for p in build_model(preset.config, device="meta").parameters()) == hf_count


# a classic Falcon block with one key/value head per query head (Falcon-RW's attention), and Falcon-7B's parallel block
# with multi-query: transformers reads `multi_query` (default true) to size k and v, so the export must say it
@pytest.mark.parametrize("kv_heads,block", [(71, "serial"), (1, "parallel")])
def test_a_classic_falcon_export_builds_our_count_in_transformers(kv_heads, block):
    cfg = PRESETS["falcon-7b"].config.replace(n_layers=2, n_kv_heads=kv_heads, block=block,
                                              parallel_shared_norm=block == "parallel")
    model_type, config = to_hf_config(cfg)
    hf_config = transformers.AutoConfig.for_model(model_type, **config)
    with torch.device("meta"):
        hf = transformers.AutoModelForCausalLM.from_config(hf_config)
    assert sum(p.numel() for p in hf.parameters()) == count_params(cfg).total
