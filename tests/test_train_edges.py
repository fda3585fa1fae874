"""The edges of TrainConfig's limits (each integer field at its least value accepted, one below refused by name;
the floats at both ends of their ranges) and the memory guard train() runs before building anything."""
from __future__ import annotations

import pytest

import engine.guard as guard
from engine.config import ModelConfig
from engine.validation import ConfigError
from engine.limits import MAX_INT
from engine.train.data import load_names
from engine.train.loop import TrainConfig, model_for, train

# The spec of each integer field's least value: a run needs a step, a sequence, a window of seq >= 2 tokens
# (one to predict from, one to predict), one eval batch; warmup, samples and the seed may be 0.
LEAST = {"steps": 1, "batch": 1, "seq": 2, "warmup": 0, "eval_every": 1, "eval_batches": 1, "samples": 0,
         "seed": 0}


def refusal(**kw) -> list[str]:
    with pytest.raises(ConfigError) as e:
        TrainConfig(**kw)
    return e.value.problems


@pytest.mark.parametrize("name", list(LEAST))
def test_each_integer_field_accepts_its_least_value_and_refuses_one_below(name):
    lo = LEAST[name]
    assert getattr(TrainConfig(**{name: lo}), name) == lo
    assert refusal(**{name: lo - 1}) == [f"{name}: {lo - 1} is not an integer >= {lo}"]
    assert getattr(TrainConfig(**{name: MAX_INT}), name) == MAX_INT               # 2^53 - 1 still exact
    assert refusal(**{name: MAX_INT + 1}) == [f"{name}: the value is more than {MAX_INT:,} (2^53 - 1)"]


@pytest.mark.parametrize("name, lo, hi", [("min_lr_ratio", 0, 1), ("dropout", 0, 0.999), ("weight_decay", 0, None),
                                          ("grad_clip", 0, None), ("z_loss", 0, None)])
def test_each_float_field_accepts_its_ends_and_refuses_past_them(name, lo, hi):
    assert getattr(TrainConfig(**{name: lo}), name) == lo
    assert len(refusal(**{name: lo - 1e-9})) == 1
    if hi is not None:
        assert getattr(TrainConfig(**{name: hi}), name) == hi
        assert refusal(**{name: hi + 1e-9}) == [f"{name}: {hi + 1e-9!r} is not a number in [{lo}, {hi}]"]
    else:
        assert refusal(**{name: -1}) == [f"{name}: -1 is not a finite number >= 0"]


def test_lr_must_be_positive():
    assert TrainConfig(lr=1e-12).lr == 1e-12
    assert refusal(lr=0) == ["lr: 0 is not a finite number > 0"]


TINY = ModelConfig(name="tiny", d_model=32, n_layers=1, n_heads=2, ffn_multiple_of=8, vocab_size=2,
                   context_length=2)


def test_a_run_whose_training_step_does_not_fit_is_refused_though_inference_would(monkeypatch):
    """The guard sizes a training step (weights, grads, AdamW state, activations), not an inference pass: with
    free memory between the two needs, train() refuses before building the model."""
    data = load_names()
    tc = TrainConfig(steps=1, batch=4, seq=8, samples=0)
    m = model_for(TINY, data, tc)
    step = guard.needed_bytes(m, tc.batch, tc.seq, "fp32", True)
    infer = guard.needed_bytes(m, tc.batch, tc.seq, "fp32", False)
    assert infer < step
    free = int((infer + step) / 2 / guard.HEADROOM)          # room for the inference pass, not the step
    monkeypatch.setattr(guard, "free_bytes", lambda device: free)
    monkeypatch.setattr("engine.train.loop.build_model", lambda *a, **k: pytest.fail("built past the guard"))
    with pytest.raises(guard.MemoryRefusal, match="a training step at batch=4, seq=8 in fp32"):
        train(TINY, tc, data, device="cpu")
