"""Context memory by hand: the dtype and batch a crossing is priced in reach every device's crossing, the pure
transformer a hybrid is compared against is named and typed, and one device's crossing is multiplied out."""
from __future__ import annotations

import pytest

from engine.budget.context_memory import all_attention, context_memory, crossing, crossings
from engine.budget.memory import kv_cache_bytes
from engine.budget.params import count_params
from engine.presets import PRESETS

QWEN = PRESETS["qwen3-next-80b-a3b"].config


@pytest.mark.parametrize("dtype, batch", [("fp32", 1), ("bf16", 64)])
def test_every_devices_crossing_is_priced_in_the_runs_dtype_and_batch(dtype, batch):
    """2 x H100 hold Qwen3-Next's bf16 weights and a whole context of one sequence, not its fp32 weights, nor
    64 sequences' state and cache."""
    got = crossings(QWEN, 262_144, batch, dtype, gpus=2, devices=["H100", "H200"])
    assert got[0].tokens is not None
    for c in got:
        assert c.tokens == crossing(QWEN, c.memory_bytes, 262_144, batch, dtype)
        assert c.all_attention_tokens == crossing(all_attention(QWEN), c.memory_bytes, 262_144, batch, dtype)
    assert [c.device for c in got] == ["2 × H100", "2 × H200"]


def test_the_pure_transformer_is_named_and_drops_the_state_dtype():
    dense = all_attention(QWEN.replace(state_dtype="fp32"))
    assert dense.name == f"{QWEN.name} (every mixer attention)" and dense.state_dtype is None
    assert set(dense.layer_types) == {"full"}


def test_a_crossing_multiplied_out_for_a_plain_transformer():
    """llama-2-7b in bf16: 2 B a weight; 32 layers x 2 (K, V) x 4,096 wide x 2 B = 524,288 B a token. A memory
    that holds the weights and exactly 1,000 tokens is first exceeded at 1,001; the weights alone at 0."""
    cfg = PRESETS["llama-2-7b"].config
    weights = 2 * count_params(cfg).total
    per_token = 32 * 2 * 4096 * 2
    assert kv_cache_bytes(cfg, 1, 1, "bf16") == per_token
    cm = context_memory(cfg, (1, 1000))
    assert (cm.weights, cm.kv, cm.state, cm.totals) == (weights, (per_token, 1000 * per_token), 0,
                                                         (weights + per_token, weights + 1000 * per_token))
    assert crossing(cfg, weights + 1000 * per_token, 4096) == 1001
    assert crossing(cfg, weights + 1000 * per_token + per_token - 1, 4096) == 1001
    assert crossing(cfg, weights - 1, 4096) == 0 and crossing(cfg, weights + 4096 * per_token, 4096) is None
    assert crossing(cfg, weights + 999 * per_token, 4096, batch=1, dtype="fp32") == 0      # fp32 weights: 4 B


@pytest.mark.parametrize("dtype, size", [("fp32", 4), ("bf16", 2), ("fp16", 2)])
@pytest.mark.parametrize("batch", [1, 3])
def test_a_crossing_in_any_dtype_and_batch_is_multiplied_out(dtype, size, batch):
    """llama-2-7b: `size` B a weight and a cached value; 32 layers x 2 (K, V) x 4,096 wide a token per sequence.
    Room for the weights and 1,000 tokens (and a byte under one more) is first exceeded at token 1,001; room for
    all 4,096 tokens is never exceeded; one byte under the weights is exceeded at 0."""
    cfg = PRESETS["llama-2-7b"].config
    weights, per_token = size * count_params(cfg).total, batch * 32 * 2 * 4096 * size
    assert crossing(cfg, weights + 1000 * per_token, 4096, batch, dtype) == 1001
    assert crossing(cfg, weights + 1001 * per_token - 1, 4096, batch, dtype) == 1001
    assert crossing(cfg, weights + 4096 * per_token, 4096, batch, dtype) is None
    assert crossing(cfg, weights + 4096 * per_token - 1, 4096, batch, dtype) == 4096
    assert crossing(cfg, weights - 1, 4096, batch, dtype) == 0
