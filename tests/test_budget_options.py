"""Every option of the budget functions, as a caller of the engine meets it:

- leaving an option out gives exactly the answer of spelling out its documented default (the default is the
  one the docstring and the app's labels promise, e.g. `activation_estimate`'s formula reads "sdpa attention");
- every option changes the answer on a model where it matters (no option is silently ignored).
A value outside an option's choices is refused under the option's own name: tests/test_choice_options.py holds
that, word for word, for every function with a choice.

The defaults are written out here, not read from the signatures: they are the documented behaviour."""
import re

import pytest

from engine.budget.activations import activation_estimate
from engine.budget.context_memory import context_memory, crossing, crossings, inference_bytes
from engine.budget.devices import roofline
from engine.budget.flops import arithmetic_intensity
from engine.budget.memory import (index_key_cache_bytes, index_key_layers, kv_cache_bytes, memory_budget,
                                  state_bytes, state_conventions)
from engine.lecture.state import fixed_state
from engine.presets import get_preset

GPT2, DSA, HYBRID = (get_preset(n).config for n in ("gpt2", "deepseek-v3.2", "qwen3.5-9b"))

# function, model, the required arguments,
# {option: (documented default, another value that matters there[, other arguments it needs to matter])}
CASES = {
    "activation_estimate": (activation_estimate, GPT2, (2, 8), {
        "dtype": ("fp32", "bf16"), "impl": ("sdpa", "explicit"), "recompute": ("none", "full")}),
    "memory_budget": (memory_budget, GPT2, (2, 8), {
        "dtype": ("bf16", "fp32"), "policy": ("mixed-bf16", "fp32"), "optimizer": ("adamw", "sgd"),
        "recompute": ("none", "selective"), "attention": ("sdpa", "explicit")}),
    "kv_cache_bytes": (kv_cache_bytes, DSA, (2, 64), {
        "dtype": ("bf16", "fp32"), "kind": ("latent", "expanded"), "index_keys": ("fp8", "dtype")}),
    # FP8 indexer keys are 132 B a token whatever the cache dtype: the dtype shows with index_keys="dtype"
    "index_key_layers": (index_key_layers, DSA, (2, 64), {
        "dtype": ("bf16", "fp32", {"index_keys": "dtype"}), "index_keys": ("fp8", "dtype")}),
    "index_key_cache_bytes": (index_key_cache_bytes, DSA, (2, 64), {
        "dtype": ("bf16", "fp32", {"index_keys": "dtype"}), "index_keys": ("fp8", "dtype")}),
    "state_bytes": (state_bytes, HYBRID, (2,), {"dtype": ("bf16", "fp32"), "convention": ("vllm", "transformers")}),
    "state_conventions": (state_conventions, HYBRID, (2,), {"dtype": ("bf16", "fp32")}),
    "context_memory": (context_memory, HYBRID, ((1024, 4096),), {"batch": (1, 3), "dtype": ("bf16", "fp32")}),
    "inference_bytes": (inference_bytes, HYBRID, (4096,), {"batch": (1, 3), "dtype": ("bf16", "fp32")}),
    "crossing": (crossing, HYBRID, (40 * 2 ** 30, 2 ** 22), {"batch": (1, 3), "dtype": ("bf16", "fp32")}),
    "arithmetic_intensity": (arithmetic_intensity, GPT2, (2, 8), {"dtype": ("bf16", "fp32")}),
    "roofline": (roofline, GPT2, ("H100", 2, 8), {"dtype": ("bf16", "fp32")}),
}
OPTIONS = [(fn, opt) for fn, (_, _, _, opts) in CASES.items() for opt in opts]


@pytest.mark.parametrize("fn,option", OPTIONS, ids=[f"{f}-{o}" for f, o in OPTIONS])
def test_leaving_an_option_out_is_its_documented_default_and_the_option_matters(fn, option):
    f, cfg, args, opts = CASES[fn]
    default, other, *context = opts[option]
    context = context[0] if context else {}
    left_out = f(cfg, *args, **context)
    assert left_out == f(cfg, *args, **context, **{option: default})
    assert left_out != f(cfg, *args, **context, **{option: other})


def test_the_activation_formula_names_the_default_attention():
    """The Budgets page prints this formula under the activation bar."""
    assert activation_estimate(GPT2, 2, 8).formula.startswith("saved by autograd (sdpa attention, N=B*T=16, e=4 B)")
    assert activation_estimate(GPT2, 2, 8, impl="explicit").formula.startswith("saved by autograd (explicit attention")


@pytest.mark.parametrize("state_dtype", [None, "bf16", "fp32"])
def test_the_all_attention_twin_does_not_depend_on_the_hybrids_state_dtype(state_dtype):
    """The Context page's dashed trace: the same model with every mixer attention keeps no recurrent state,
    so hybrids that differ only in the dtype of that state have one and the same twin (one cached entry, one
    config a user can export as a plain transformer)."""
    from engine.budget.context_memory import all_attention
    twin = all_attention(HYBRID.replace(state_dtype=state_dtype))
    assert twin == all_attention(HYBRID.replace(state_dtype=None))
    assert twin.state_dtype is None and all(t in ("full", "sliding", "none") for t in twin.layer_types)


@pytest.mark.parametrize("fn", [index_key_layers, index_key_cache_bytes])
def test_indexer_keys_take_zero_tokens_and_refuse_a_negative_count_by_name(fn):
    """0 tokens is a cache's fixed part (no indexer key yet); -1 tokens is a caller's mistake, refused under the
    argument's own name rather than answered with negative bytes."""
    assert index_key_cache_bytes(DSA, 2, 0) == 0 < index_key_cache_bytes(DSA, 2, 1)
    with pytest.raises(ValueError, match=r"^tokens: -1 is not an integer >= 0$"):
        fn(DSA, 2, -1)


@pytest.mark.parametrize("call, message", [
    (lambda: kv_cache_bytes(DSA, 1, 0), "tokens: 0 is not an integer >= 1"),
    (lambda: kv_cache_bytes(DSA, 0, 8), "batch: 0 is not an integer >= 1"),
    (lambda: context_memory(HYBRID, (-4, -1)), "tokens: -1 is not an integer >= 1"),
    (lambda: crossings(HYBRID, 1024, gpus=0), "gpus: 0 is not an integer >= 1"),
    (lambda: crossings(HYBRID, 0), "max_tokens: 0 is not an integer >= 1"),
    (lambda: fixed_state(HYBRID, (0, 64)), "tokens: 0 is not an integer >= 1"),
])
def test_a_bad_count_is_refused_under_the_argument_s_own_name(call, message):
    """Each budget names the argument the caller gave (tokens, gpus, max_tokens), not a generic 'seq' or 'batch'."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()
