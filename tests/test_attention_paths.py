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


BF16 = {"alibi": dict(position="alibi"), "temperature": dict(attn_temperature=0.5, attn_temperature_floor=2),
        "sinks": dict(attn_sinks=True, n_kv_heads=1), "softcap": dict(attn_softcap=2.0)}


def _unit(cfg: ModelConfig, dtype: torch.dtype):
    """The model with unit-scale matrices (sinks too), then rounded to bf16 once: the fp32 copy holds the same
    values, so the two differ only by bf16 arithmetic."""
    model = build_model(cfg, seed=1).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2 or name.endswith("sinks"):
                p.copy_(torch.randn(p.shape, generator=g) / max(p.shape[-1], 1) ** 0.5)
    return model.to(torch.bfloat16).to(dtype)


@pytest.mark.parametrize("impl", ["sdpa", "explicit"])
@pytest.mark.parametrize("name", ["alibi", "temperature", "sinks", "softcap", "mla"])
def test_a_bf16_model_follows_its_fp32_self_on_either_path(name, impl):
    """A bf16 model's attention (ALiBi's float mask, the query temperature, sinks, soft-capping, MLA) keeps q, k,
    v, mask and probabilities in one dtype, the softmax in fp32, so its logits stay within bf16 accuracy of the
    same weights run in fp32."""
    cfg = CONFIGS["mla"] if name == "mla" else PLAIN.replace(**BF16[name])
    idx = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(0))
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = _unit(cfg, dtype)
        model.set_attention(impl)
        with torch.no_grad():
            out[dtype] = model(idx)
    assert out[torch.bfloat16].dtype == torch.bfloat16
    want = out[torch.float32]
    torch.testing.assert_close(out[torch.bfloat16].float(), want, atol=0.05 * want.abs().max().item(), rtol=0.05)
