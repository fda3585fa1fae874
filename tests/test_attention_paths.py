"""Which attention path a model runs: a freshly built model trains on SDPA (what the activation estimate's default
assumes), set_attention switches every softmax-attention layer (plain and MLA), and a misspelt path is refused
rather than silently running SDPA."""
import pytest
import torch

from engine.config import ModelConfig
from engine.model import build_model
from tests.layer_checks import module_saved_bytes

PLAIN = ModelConfig(vocab_size=11, d_model=16, n_layers=2, n_heads=2, position="rope", norm="rmsnorm", d_ff=24,
                    ffn="swiglu", bias=False)
CONFIGS = {"plain": PLAIN, "mla": PLAIN.replace(kv_lora_rank=8, q_lora_rank=None, qk_rope_head_dim=4,
                                                qk_nope_head_dim=4, v_head_dim=8)}


def _saved(model) -> int:
    idx = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(0))
    return module_saved_bytes(model, idx)


@pytest.mark.parametrize("name", CONFIGS)
def test_a_new_model_runs_sdpa_until_told_otherwise(name):
    """Saved-tensor bytes tell the paths apart (each keeps its own tensors for backward)."""
    model = build_model(CONFIGS[name])
    fresh = _saved(model)
    model.set_attention("explicit")
    explicit = _saved(model)
    model.set_attention("sdpa")
    assert fresh == _saved(model) != explicit


def test_a_misspelt_path_is_refused():
    model = build_model(PLAIN)
    with pytest.raises(ValueError, match="impl: 'explict' is not one of sdpa, explicit"):
        model.set_attention("explict")
