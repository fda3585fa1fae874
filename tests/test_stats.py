"""Live statistics of a built model: residual RMS, attention entropy and maps, and the CPU refusal."""
import math

import pytest
import torch

from engine.config import ModelConfig
from engine.measure.stats import CPU_PARAM_LIMIT, StatsRefusal, check_live, model_stats
from engine.presets import PRESETS

TINY = ModelConfig(vocab_size=50, context_length=16, d_model=32, n_layers=3, n_heads=4)


def test_shapes_and_probabilities():
    s = model_stats(TINY, tokens=12, device="cpu")
    assert s.tokens == 12 and len(s.residual_rms) == TINY.n_layers + 1
    assert s.probs.shape == (3, 4, 12, 12)
    assert torch.allclose(s.probs.sum(-1), torch.ones(3, 4, 12))
    assert torch.all(s.probs.triu(1) == 0)                       # causal
    assert all(len(row) == 4 for row in s.entropy)
    assert all(0 <= e <= u + 1e-6 for row, u in zip(s.entropy, s.uniform_entropy) for e in row)
    assert s.uniform_entropy[0] == pytest.approx(sum(math.log(i + 1) for i in range(12)) / 12)


def test_window_limits_visible_keys_and_is_deterministic():
    cfg = TINY.replace(attn_window=3)
    a, b = model_stats(cfg, tokens=10, device="cpu"), model_stats(cfg, tokens=10, device="cpu")
    assert a.residual_rms == b.residual_rms
    assert torch.all(a.probs[0, 0].tril(-3) == 0)
    assert a.uniform_entropy[0] == pytest.approx(sum(math.log(min(i + 1, 3)) for i in range(10)) / 10)


def test_tokens_capped_at_context_and_first_rms_is_embedding():
    s = model_stats(TINY.replace(position="none"), tokens=100, device="cpu")
    assert s.tokens == TINY.context_length
    assert s.residual_rms[0] == pytest.approx(0.02, rel=0.3)      # N(0, 0.02) token embeddings


def test_refuses_big_models_on_cpu_with_numbers():
    with pytest.raises(StatsRefusal, match="8,030,261,248 parameters.*200,000,000"):
        check_live(PRESETS["llama-3-8b"].config, "cpu")
    check_live(PRESETS["gpt2"].config, "cpu")
    assert CPU_PARAM_LIMIT > PRESETS["gpt2"].reference_params
    check_live(PRESETS["llama-3-8b"].config, "meta")               # only CPU is limited here
