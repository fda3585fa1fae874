"""RoPE scaling (linear, dynamic NTK, llama3, yarn, longrope) against transformers: the inverse frequencies and
attention factor of our rope_inv_freq equal transformers' rope init functions, and tiny Llama models with each
scaling, every weight redrawn, give the same logits on sequences longer than the original context (where the
scaled frequencies are used) and, for the length-dependent types, shorter ones too."""
import math

import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.params import count_params  # noqa: E402
from engine.config import ModelConfig  # noqa: E402
from engine.interop import from_transformers, hf_model_from_config, scramble_, to_hf_config  # noqa: E402
from engine.interop.hf_config import from_hf_config  # noqa: E402
from engine.layers.position import plain_inv_freq, rope_inv_freq  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

transformers.logging.set_verbosity_error()
V = 97
_LLAMA = dict(vocab_size=V, hidden_size=64, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, bos_token_id=None, eos_token_id=None, pad_token_id=None)
HALF = 8   # rotary_dim / 2 with head_dim 16


def _params(kind, **kw):
    return {"rope_type": kind, "rope_theta": 10000.0, **kw}


# name -> (rope_parameters, max_position_embeddings); original context 16 where the type has one
SCALINGS = {
    "linear": (_params("linear", factor=4.0), 64),
    "dynamic": (_params("dynamic", factor=3.0), 16),
    "llama3": (_params("llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                       original_max_position_embeddings=16), 64),
    # low_freq_factor 2: the long-wave cut L0 / low is 8 tokens, not L0 (a band that factor 1 cannot tell apart)
    "llama3_low2": (_params("llama3", factor=4.0, low_freq_factor=2.0, high_freq_factor=6.0,
                            original_max_position_embeddings=16), 64),
    "yarn": (_params("yarn", factor=4.0, beta_fast=32.0, beta_slow=1.0, original_max_position_embeddings=16), 64),
    "yarn_untruncated": (_params("yarn", factor=4.0, beta_fast=8.0, beta_slow=0.5, truncate=False,
                                 original_max_position_embeddings=16, attention_factor=1.3), 64),
    "longrope": (_params("longrope", short_factor=[1.0 + 0.1 * i for i in range(HALF)],
                         long_factor=[2.0 + 3 * i for i in range(HALF)]), 64),
}


def _hf_config(name):
    params, max_pos = SCALINGS[name]
    extra = {"original_max_position_embeddings": 16} if params["rope_type"] == "longrope" else {}
    return dict(_LLAMA, rope_parameters=dict(params), max_position_embeddings=max_pos, **extra)


@pytest.mark.parametrize("tokens", [8, 40])
@pytest.mark.parametrize("name", SCALINGS)
def test_inverse_frequencies_and_attention_factor_equal_transformers(name, tokens):
    config = _hf_config(name)
    hf_cfg = transformers.AutoConfig.for_model("llama", **config)
    kind = SCALINGS[name][0]["rope_type"]
    seq = tokens if kind in ("dynamic", "longrope") else None
    ref, ref_factor = ROPE_INIT_FUNCTIONS[kind](hf_cfg, "cpu", seq_len=seq)
    ours, factor = rope_inv_freq(from_hf_config(dict(config, model_type="llama")), tokens)
    torch.testing.assert_close(ours, ref.float(), rtol=1e-6, atol=0)
    assert factor == pytest.approx(float(ref_factor), rel=1e-12)
    if kind == "dynamic" and tokens <= 16 or kind == "longrope" and tokens > 16:
        return
    assert not torch.allclose(ours, plain_inv_freq(16, 10000.0))   # the scaling changed the frequencies


@pytest.mark.parametrize("factor", [1.0, 1.25, 1.5, 2.0, 2.5, 4.0])
def test_yarn_at_every_factor_equals_transformers(factor):
    """YaRN's attention factor is 1 at s = 1 and 0.1 ln s + 1 past it (1.5: 1.0405...), its frequencies
    interpolated by s: both as transformers computes them, at factors just past 1 as at 4."""
    config = dict(_LLAMA, max_position_embeddings=64, rope_parameters=_params(
        "yarn", factor=factor, beta_fast=32.0, beta_slow=1.0, original_max_position_embeddings=16))
    ref, ref_factor = ROPE_INIT_FUNCTIONS["yarn"](transformers.AutoConfig.for_model("llama", **config), "cpu")
    ours, got = rope_inv_freq(from_hf_config(dict(config, model_type="llama")), 40)
    torch.testing.assert_close(ours, ref.float(), rtol=1e-6, atol=0)
    assert got == pytest.approx(float(ref_factor), rel=1e-12)
    assert got == pytest.approx(1.0 if factor == 1 else 0.1 * math.log(factor) + 1.0, rel=1e-12)


@pytest.mark.parametrize("max_pos", [16, 20, 24, 32, 64])
def test_longrope_attention_factor_at_every_stretch_equals_transformers(max_pos):
    """LongRoPE's factor sqrt(1 + ln s / ln L0), s = max_position_embeddings / L0 (16): 1 at s = 1, and past it
    even for s = 1.25 or 1.5, as transformers computes it."""
    params, _ = SCALINGS["longrope"]
    config = dict(_LLAMA, rope_parameters=dict(params), max_position_embeddings=max_pos,
                  original_max_position_embeddings=16)
    _, ref_factor = ROPE_INIT_FUNCTIONS["longrope"](transformers.AutoConfig.for_model("llama", **config), "cpu",
                                                    seq_len=40)
    _, got = rope_inv_freq(from_hf_config(dict(config, model_type="llama")), 40)
    s = max_pos / 16
    assert got == pytest.approx(float(ref_factor), rel=1e-12)
    assert got == pytest.approx(1.0 if s == 1 else math.sqrt(1 + math.log(s) / math.log(16)), rel=1e-12)


def test_llama3_formula_by_hand():
    """Llama 3.1's rule on three frequencies (one per band), written out: L0 = 16, s = 8, low 1, high 4."""
    cfg = ModelConfig(position="rope", d_model=64, n_heads=4, rope_scaling="llama3", rope_factor=8.0,
                      rope_original_context=16)
    w, _ = rope_inv_freq(cfg, 8)
    plain = plain_inv_freq(16, 10000.0)
    for i in range(HALF):
        wave = 2 * math.pi / plain[i].item()
        a = (16 / wave - 1) / (4 - 1)
        want = plain[i] if wave < 4 else plain[i] / 8 if wave > 16 else (1 - a) * plain[i] / 8 + a * plain[i]
        assert w[i].item() == pytest.approx(float(want), rel=1e-6)


@pytest.fixture(scope="module")
def models():
    out = {}
    for i, name in enumerate(SCALINGS):
        torch.manual_seed(i)
        hf = hf_model_from_config("llama", _hf_config(name), attn_implementation="eager").eval()
        scramble_(hf, seed=i)
        out[name] = (hf, from_transformers(hf))
    return out


@pytest.mark.parametrize("tokens", [12, 40])
@pytest.mark.parametrize("name", SCALINGS)
def test_logits_match_transformers(models, name, tokens):
    hf, ours = models[name]
    assert ours.cfg.rope_scaling == SCALINGS[name][0]["rope_type"]
    idx = torch.randint(0, V, (2, tokens), generator=torch.Generator().manual_seed(tokens))
    with torch.no_grad():
        ref, got = hf(input_ids=idx).logits, ours(idx)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert count_params(ours.cfg).total == sum(p.numel() for p in hf.parameters())


@pytest.mark.parametrize("name", SCALINGS)
def test_the_scaling_matters_and_exports_back(models, name):
    """Plain RoPE with the same weights gives other logits at 40 tokens; the export writes the same
    rope_parameters back, so transformers builds the same scaling."""
    hf, ours = models[name]
    idx = torch.randint(0, V, (1, 40), generator=torch.Generator().manual_seed(1))
    plain = from_transformers(hf)
    plain.cfg = plain.cfg.replace(rope_scaling="none")
    with torch.no_grad():
        assert (plain(idx) - hf(input_ids=idx).logits).abs().max() > 1e-3
    family, config = to_hf_config(ours.cfg)
    assert from_hf_config(dict(config, model_type=family)) == ours.cfg.replace(name=family)


def test_decoding_with_a_cache_uses_the_growing_length():
    """dynamic and longrope depend on the tokens seen so far: decoding token by token with a KV cache gives what
    the full forward gives at each step, as long as the frequencies did not change (they are the short ones
    here for longrope until position 16)."""
    from engine.model import KVCache, build_model
    cfg = from_hf_config(dict(_hf_config("longrope"), model_type="llama"))
    model = build_model(cfg).eval()
    idx = torch.randint(0, V, (1, 12), generator=torch.Generator().manual_seed(0))
    cache = KVCache(cfg.n_layers)
    with torch.no_grad():
        steps = torch.cat([model(idx[:, t:t + 1], cache) for t in range(12)], dim=1)
        torch.testing.assert_close(steps, model(idx), rtol=1e-5, atol=1e-5)


def test_llama_3_1_8b_published_config_imports_exactly_with_llama3_scaling():
    """The published config.json (tests/data/hf_configs) gives transformers' 8,030,261,248, and a model shrunk
    to 2 layers of 2 heads (head_dim 128, theta 500000 and the llama3 rope_scaling kept) matches its logits."""
    import json
    from pathlib import Path
    d = json.loads((Path(__file__).parent / "data" / "hf_configs" / "llama3_1_8b.json").read_text())
    cfg = from_hf_config(d)
    assert count_params(cfg).total == 8_030_261_248
    assert (cfg.rope_scaling, cfg.rope_factor, cfg.rope_original_context) == ("llama3", 8.0, 8192)
    small = dict(d, hidden_size=256, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, vocab_size=V, bos_token_id=None, eos_token_id=None)
    hf = hf_model_from_config("llama", {k: v for k, v in small.items() if k != "model_type"},
                              attn_implementation="eager").float().eval()   # the config says bfloat16
    scramble_(hf, seed=3)
    ours = from_transformers(hf)
    assert ours.cfg.rope_scaling == "llama3"
    idx = torch.randint(0, V, (2, 24), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(ours(idx), hf(input_ids=idx).logits, rtol=1e-5, atol=1e-5)


def test_yarn_ramp_ends_at_the_last_dimension_as_transformers():
    """A low base (10) and a long original context (4,096 tokens): beta_slow's dimension lies past the last
    rotary dimension, so the ramp ends there (transformers' min(high, dim - 1)); the frequencies between are
    blended on that ramp."""
    params = _params("yarn", factor=4.0, beta_fast=1000.0, beta_slow=1.0, original_max_position_embeddings=4096)
    params["rope_theta"] = 10.0
    config = dict(_LLAMA, rope_parameters=params, max_position_embeddings=16384)
    ref, ref_factor = ROPE_INIT_FUNCTIONS["yarn"](transformers.AutoConfig.for_model("llama", **config), "cpu")
    ours, factor = rope_inv_freq(from_hf_config(dict(config, model_type="llama")), 8)
    torch.testing.assert_close(ours, ref.float(), rtol=1e-6, atol=0)
    assert factor == pytest.approx(float(ref_factor), rel=1e-12)
    plain = plain_inv_freq(16, 10.0)
    keep = 1 - torch.arange(HALF) / 15                    # ramp from dimension 0 to 15 = rotary_dim - 1
    torch.testing.assert_close(ours, plain / 4 * (1 - keep) + plain * keep, rtol=1e-6, atol=0)
