"""Memory closed forms: reference KV-cache sizes, 16 bytes/param, policies, KV against a real cache."""
import math
import re

import pytest

from engine.budget.activations import activation_estimate
from engine.budget.memory import DTYPE_BYTES, OPTIMIZERS, POLICIES, RECOMPUTE, kv_cache_bytes, memory_budget
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.measure.kvcache import measure_kv_cache
from engine.presets import get_preset
from tests.helpers import make

GiB, MiB = 2**30, 2**20


def test_llama3_8b_kv_cache_at_8192_is_1_gib():
    assert kv_cache_bytes(get_preset("llama-3-8b").config, 1, 8192, "bf16") == GiB


@pytest.mark.parametrize("kv_heads,expected", [(32, 4 * GiB), (8, GiB), (1, 128 * MiB)])
def test_mha_gqa_mqa_reference(kv_heads, expected):
    cfg = ModelConfig(n_layers=32, n_heads=32, head_dim=128, d_model=4096, n_kv_heads=kv_heads)
    assert kv_cache_bytes(cfg, 1, 8192, "bf16") == expected


def test_sliding_window_layers_hold_only_the_window():
    mistral = get_preset("mistral-7b").config
    assert kv_cache_bytes(mistral, 1, 32768) == kv_cache_bytes(mistral, 1, 4096)
    gemma = get_preset("gemma-2-2b").config         # 13 local (window 4096) and 13 global layers
    per_token_layer = 2 * 4 * 256 * 2
    assert kv_cache_bytes(gemma, 2, 8192) == 2 * per_token_layer * (13 * 4096 + 13 * 8192)


def test_mixed_bf16_adamw_is_16_bytes_per_param():
    cfg = get_preset("llama-2-7b").config
    b = memory_budget(cfg, 1, 16, policy="mixed-bf16", optimizer="adamw")
    state = b.weights_bytes + b.grads_bytes + b.optimizer_bytes + b.master_bytes
    assert state == 16 * count_params(cfg).total
    assert (b.weights_bytes, b.master_bytes) == (2 * count_params(cfg).total, 4 * count_params(cfg).total)


@pytest.mark.parametrize("policy,optimizer,per_param", [
    ("fp32", "adamw", 16), ("fp32", "sgd-momentum", 12), ("fp32", "sgd", 8), ("bf16", "adamw", 8),
    ("mixed-fp16", "sgd-momentum", 12), ("mixed-bf16", "sgd", 8)])
def test_state_bytes_per_param(policy, optimizer, per_param):
    cfg = get_preset("gpt2").config
    b = memory_budget(cfg, 1, 8, policy=policy, optimizer=optimizer)
    assert b.weights_bytes + b.grads_bytes + b.optimizer_bytes + b.master_bytes == per_param * count_params(cfg).total


def test_totals_and_json_keys():
    cfg = get_preset("gpt2").config
    b = memory_budget(cfg, 4, 1024, dtype="bf16", recompute="selective")
    assert b.train_total_bytes == (b.weights_bytes + b.grads_bytes + b.optimizer_bytes + b.master_bytes
                                   + b.activations_bytes)
    assert b.infer_total_bytes == 2 * count_params(cfg).total + b.kv_cache_bytes
    assert b.activations_bytes == b.embedding_bytes + sum(b.activations_per_layer) + b.logits_bytes
    d = b.as_dict()
    for key in ("weights_bytes", "grads_bytes", "optimizer_bytes", "master_bytes", "activations_bytes",
                "kv_cache_bytes", "train_total_bytes", "infer_total_bytes"):
        assert isinstance(d[key], int) and key in b.formulas and b.formulas[key]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_each_training_state_formula_multiplies_out_to_its_bytes(policy, optimizer):
    """The Budgets table shows a formula beside each number: "P * 2 B (...)", "P * 2 states (...) * 4 B", or
    "0: ..." when there is none; its factors times P must give the number shown next to it."""
    cfg = get_preset("gpt2").config
    P = count_params(cfg).total
    b = memory_budget(cfg, 1, 8, policy=policy, optimizer=optimizer)
    for key in ("weights_bytes", "grads_bytes", "optimizer_bytes", "master_bytes"):
        text = b.formulas[key]
        shown = 0 if text.startswith("0:") else P * math.prod(int(f) for f in re.findall(r"\* (\d+) ", text))
        assert shown == getattr(b, key), (key, text)
    assert b.formulas["weights_bytes"].startswith(f"P={P:,} params * ")


def test_every_option_combination_gives_the_table_values():
    cfg = make({"attn_window": 3, "dropout": 0.1})
    P = count_params(cfg).total
    # policy -> bytes per parameter of (weights, grads, master, each optimizer state); optimizer -> states
    per_param = {"fp32": (4, 4, 0, 4), "bf16": (2, 2, 0, 2), "mixed-bf16": (2, 2, 4, 4), "mixed-fp16": (2, 2, 4, 4)}
    states = {"adamw": 2, "sgd-momentum": 1, "sgd": 0}
    e = {"fp32": 4, "bf16": 2, "fp16": 2}
    held = 2 * (3 + 3) * 2 * cfg.kv_width                 # K and V: both layers windowed, each keeps 3 of 6; B=2
    assert set(per_param) == set(POLICIES) and set(states) == set(OPTIMIZERS) and set(e) == set(DTYPE_BYTES)
    for dtype in DTYPE_BYTES:
        for policy, (w, g, m, sb) in per_param.items():
            for opt, n in states.items():
                for rc in RECOMPUTE:
                    b = memory_budget(cfg, 2, 6, dtype, policy, opt, rc)
                    act = activation_estimate(cfg, 2, 6, dtype, "sdpa", rc).total
                    assert b.train_total_bytes == (w + g + m + n * sb) * P + act, (dtype, policy, opt, rc)
                    assert b.infer_total_bytes == e[dtype] * P + held * e[dtype], (dtype, policy, opt, rc)


@pytest.mark.parametrize("bad,match", [(dict(dtype="fp8"), "dtype"), (dict(policy="amp"), "policy"),
                                       (dict(optimizer="adam"), "optimizer"), (dict(recompute="some"), "recompute"),
                                       (dict(batch=0), "batch"), (dict(seq=-1), "seq")])
def test_bad_options_name_the_field(bad, match):
    args = dict(batch=1, seq=8) | bad
    with pytest.raises(ValueError, match=f"^{match}: "):     # the field's own name, first (the form's label)
        memory_budget(get_preset("gpt2").config, **args)


@pytest.mark.parametrize("choice", [{}, {"n_kv_heads": 1}, {"n_kv_heads": 2, "head_dim": 8},
                                    {"attn_window": 3}, {"attn_window": 3, "global_every": 2}])
@pytest.mark.parametrize("tokens", [1, 2, 7])
def test_kv_cache_equals_real_cache_exactly(choice, tokens):
    for dtype in ("fp32", "bf16"):
        m = measure_kv_cache(make(choice), 2, tokens, dtype)
        assert m.estimate == m.measured, (choice, tokens, dtype, m)
