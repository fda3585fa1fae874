"""Formulas held where their conventions differ: a weight dtype unlike the policy's, window layers with contexts
shorter and longer than the window, and every optimizer against torch's own optimizer state.

Each test compares with a measurement (the built model's tensors, FlopCounterMode, torch.optim state) or a
few-line formula written here, never only with another closed form.
"""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from engine.budget.flops import decode_flops
from engine.budget.memory import OPTIMIZERS, POLICIES, kv_cache_bytes, memory_budget, pure_policy
from engine.budget.params import count_params
from engine.guard import needed_bytes, transient_bytes
from engine.model import KVCache, build_model
from engine.runtime import TORCH_DTYPES
from tests.helpers import make

WINDOWED = make({"attn_window": 3, "global_every": 2, "n_kv_heads": 2})   # layer 1 local (w=3), layer 2 global


def _tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_inference_bytes_follow_the_dtype_not_the_policy(dtype, policy):
    # inference holds the weights in `dtype` whatever the training policy says (a policy's own byte count
    # coincides with the dtype's only in some pairs, e.g. bf16 under mixed-bf16)
    b = memory_budget(WINDOWED, 2, 7, dtype=dtype, policy=policy)
    model = build_model(WINDOWED, dtype=TORCH_DTYPES[dtype])
    weights = _tensor_bytes(model.parameters())              # parameters() yields a tied tensor once
    cache = KVCache(WINDOWED.n_layers)
    with torch.no_grad():
        model(torch.zeros(2, 7, dtype=torch.long), cache)
    assert b.kv_cache_bytes == cache.nbytes()
    assert b.infer_total_bytes == weights + cache.nbytes()


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_training_state_follows_the_policy_not_the_dtype(dtype):
    P = count_params(WINDOWED).total
    # policy -> (weights, grads, master, per optimizer state) bytes per parameter, from the policies' definitions
    per_param = {"fp32": (4, 4, 0, 4), "bf16": (2, 2, 0, 2), "mixed-bf16": (2, 2, 4, 4), "mixed-fp16": (2, 2, 4, 4)}
    states = {"adamw": 2, "sgd-momentum": 1, "sgd": 0}
    assert set(per_param) == set(POLICIES) and set(states) == set(OPTIMIZERS)
    for policy, (w, g, m, s) in per_param.items():
        for opt, n in states.items():
            b = memory_budget(WINDOWED, 2, 7, dtype=dtype, policy=policy, optimizer=opt)
            assert (b.weights_bytes, b.grads_bytes, b.master_bytes, b.optimizer_bytes) == \
                (w * P, g * P, m * P, n * s * P), (policy, opt)


OPTIMIZER_OF = {"adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
                "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9),
                "sgd": lambda ps: torch.optim.SGD(ps, lr=1e-3)}


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("policy,dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_optimizer_bytes_equal_torch_optimizer_state(optimizer, policy, dtype):
    model = build_model(WINDOWED, dtype=dtype)
    opt = OPTIMIZER_OF[optimizer](list(model.parameters()))
    loss = model(torch.zeros(2, 5, dtype=torch.long)).float().square().mean()
    loss.backward()
    opt.step()
    # AdamW also keeps a 0-d step counter per parameter tensor: per tensor, not per element, so not counted
    state = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t) and t.dim() > 0]
    b = memory_budget(WINDOWED, 2, 5, dtype="fp32", policy=policy, optimizer=optimizer)
    assert b.optimizer_bytes == _tensor_bytes(state)
    assert b.weights_bytes == _tensor_bytes(model.parameters())
    assert b.grads_bytes == _tensor_bytes(p.grad for p in model.parameters())


def _decode_step_flops(cfg, context: int) -> int:
    model = build_model(cfg).eval()
    model.set_attention("explicit")          # on CPU FlopCounterMode counts the explicit matmuls, not SDPA
    cache = KVCache(cfg.n_layers)
    with torch.no_grad():
        model(torch.zeros(2, context, dtype=torch.long), cache)
        counter = FlopCounterMode(display=False)
        with counter:
            model(torch.zeros(2, 1, dtype=torch.long), cache)
    return counter.get_total_flops()


@pytest.mark.parametrize("context", [1, 2, 3, 5, 10])
def test_decode_flops_shorter_and_longer_than_the_window(context):
    cfg, B, A = WINDOWED, 2, WINDOWED.attn_width
    d, f, K, V = cfg.d_model, cfg.ffn_width, cfg.kv_width, cfg.vocab_size
    matmuls = 2 * B * (cfg.n_layers * (2 * d * A + 2 * d * K + 2 * d * f) + d * V)
    local, full = min(context + 1, 3), context + 1          # keys the new query may see in each layer
    assert decode_flops(cfg, B, context) == matmuls + 4 * B * A * (local + full)
    # the real step multiplies one more key in the local layer once its cache is full: the cache keeps
    # `window` keys and the new one is appended before masking, so the oldest is computed and masked away
    # (decode_flops counts visible keys, as flops_budget(causal=True) does)
    masked = 1 if context >= 3 else 0
    assert _decode_step_flops(cfg, context) == decode_flops(cfg, B, context) + 4 * B * A * masked


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("tokens", [2, 3, 4, 9])
def test_kv_bytes_shorter_and_longer_than_the_window(dtype, tokens):
    cfg, e = WINDOWED, {"fp32": 4, "bf16": 2}[dtype]
    held = min(tokens, 3) + tokens                           # local layer keeps the last 3, global keeps all
    assert kv_cache_bytes(cfg, 2, tokens, dtype) == 2 * held * 2 * cfg.kv_width * e


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_pure_policy_is_a_plain_model_in_that_dtype(dtype):
    # what the guard budgets for a training step: weights, grads and AdamW state all in `dtype`, no master
    model = build_model(WINDOWED, dtype=TORCH_DTYPES[dtype])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.zeros(1, 3, dtype=torch.long)).float().mean().backward()
    opt.step()
    state = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t) and t.dim() > 0]
    b = memory_budget(WINDOWED, 1, 3, dtype, pure_policy(dtype), "adamw")
    measured = _tensor_bytes(model.parameters()) + _tensor_bytes(p.grad for p in model.parameters())
    assert (b.weights_bytes + b.grads_bytes, b.optimizer_bytes, b.master_bytes) == \
        (measured, _tensor_bytes(state), 0)


def test_param_count_dict_names_every_number():
    c = count_params(WINDOWED)
    built = sum(p.numel() for p in build_model(WINDOWED, device="meta").parameters())
    non_embedding = built - 13 * 16 - 16 * 16
    assert c.as_dict() == {"total_params": built, "non_embedding_params": non_embedding,
                           "active_params": built,                                          # dense: all active
                           "active_non_embedding_params": non_embedding, "per_layer_params": c.per_layer,
                           "tying_saves_params": 13 * 16, "tied": True, "components": c.components,
                           "mtp_params": 0}   # no multi-token-prediction modules (beside the total, never in it)
    assert c.per_layer == (built - 13 * 16 - 16 * 16 - 2 * 16) // 2          # two blocks; final LayerNorm 2*d


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_inference_need_is_weights_cache_and_returned_logits_plus_transients(dtype):
    """The persistent part equals real tensors; the guard adds its one-op temporaries (transient_bytes, held
    >= the measured peak by test_guard_peak) on top."""
    model = build_model(WINDOWED, dtype=TORCH_DTYPES[dtype])
    cache = KVCache(WINDOWED.n_layers)
    with torch.no_grad():
        logits = model(torch.zeros(2, 7, dtype=torch.long), cache)
    measured = _tensor_bytes(model.parameters()) + cache.nbytes() + _tensor_bytes([logits])
    extra = transient_bytes(WINDOWED, 2, 7, dtype, False, "sdpa")
    assert extra > 0
    assert needed_bytes(WINDOWED, 2, 7, dtype, training=False) == measured + extra
