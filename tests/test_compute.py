"""app.compute's derived series (cached engine closed forms) held against the reference facts."""
from app import compute
from engine.budget.memory import POLICIES
from engine.presets import PRESETS

GIB, MIB = 2**30, 2**20


def test_kv_series_reproduces_the_reference_kv_sizes():
    grid, series = compute.kv_series(PRESETS["llama-3-8b"].config, 1, "bf16")
    assert grid[0] == 1 and grid[-1] == 8192
    at_context = {label: values[-1] for label, values in series.items()}
    # L=32, 8,192 tokens, 32 query heads of 128, bf16: MHA 4 GiB, GQA-8 1 GiB, MQA 128 MiB; a 2,048 window a quarter
    assert at_context == {"current (GQA-8)": GIB, "MHA, full attention": 4 * GIB, "MQA, full attention": 128 * MIB,
                          "GQA-8, window 2,048 in every layer": GIB // 4}


def test_policy_memories_hold_16_bytes_per_param_for_mixed_adamw():
    m = compute.policy_memories(PRESETS["gpt2"].config, 1, 1024)
    assert tuple(m) == POLICIES
    b = m["mixed-bf16"]
    assert b.weights_bytes + b.grads_bytes + b.master_bytes + b.optimizer_bytes == 16 * 124_439_808
    assert m["fp32"].weights_bytes == 4 * 124_439_808 and m["bf16"].weights_bytes == 2 * 124_439_808
