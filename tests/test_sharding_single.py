"""Sharding helpers in one process: what parallelize returns, the refusals word for word, clip_grad_norm's
arithmetic by hand and a rank's bytes multiplied out."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from engine.config import ModelConfig
from engine.model import build_model
from engine.train.ddp import SINGLE, DistInfo
from engine.train.sharding import clip_grad_norm, data_slice, full, parallelize, rank_bytes, tp_problem

TINY = ModelConfig(name="tiny", d_model=32, n_layers=1, n_heads=2, ffn_multiple_of=8, vocab_size=11,
                   context_length=8)


@pytest.mark.parametrize("mode", ["ddp", "fsdp", "tp"])
def test_one_process_trains_the_model_itself_in_every_mode(mode):
    model = build_model(TINY, seed=0)
    assert parallelize(model, SINGLE, mode) is model


def test_an_unknown_mode_is_named_word_for_word_when_there_are_ranks():
    with pytest.raises(ValueError) as e:
        parallelize(build_model(TINY, seed=0), DistInfo(rank=0, world=2), "zero")
    assert str(e.value) == "parallel: 'zero' is not one of ddp, fsdp, tp"


def test_tp_refuses_a_model_it_cannot_split_word_for_word():
    model = build_model(TINY.replace(attn_sinks=True), seed=0)
    with pytest.raises(ValueError) as e:
        parallelize(model, DistInfo(rank=0, world=2), "tp")
    assert str(e.value) == ("parallel: tp splits attention heads and FFN columns only; attn_sinks keeps one logit "
                            "per head on every rank (use ddp or fsdp)")


@pytest.mark.parametrize("change, want", [
    ({}, None),
    ({"attn_sinks": True}, "attn_sinks keeps one logit per head on every rank"),
    ({"qk_norm": True, "qk_norm_scope": "all_heads"}, "qk_norm_scope all_heads normalizes over every head at once"),
    ({"qk_norm": True}, None),
])
def test_tp_problem_names_the_part_that_needs_every_head(change, want):
    assert tp_problem(TINY.replace(**change)) == want


@pytest.mark.parametrize("mode, want", [("ddp", (1, 3)), ("fsdp", (1, 3)), ("tp", (0, 1))])
def test_tensor_parallel_ranks_take_the_whole_batch(mode, want):
    assert data_slice(DistInfo(rank=1, world=3), mode) == want


def _params(*grads: list[float]) -> list[nn.Parameter]:
    out = []
    for g in grads:
        p = nn.Parameter(torch.zeros(len(g)))
        p.grad = torch.tensor(g)
        out.append(p)
    return out


def test_clip_grad_norm_scales_by_max_over_norm_like_torch():
    ps = _params([3.0, 0.0], [0.0, 4.0])            # global norm 5
    norm = clip_grad_norm(ps, 1.0)
    assert float(norm) == 5.0
    coef = 1.0 / (5.0 + 1e-6)
    torch.testing.assert_close(ps[0].grad, torch.tensor([3.0 * coef, 0.0]), rtol=1e-7, atol=0)
    torch.testing.assert_close(ps[1].grad, torch.tensor([0.0, 4.0 * coef]), rtol=1e-7, atol=0)
    ref = _params([3.0, 0.0], [0.0, 4.0])
    torch.nn.utils.clip_grad_norm_(ref, 1.0)
    assert [p.grad.tolist() for p in ps] == [p.grad.tolist() for p in ref]


def test_clip_grad_norm_leaves_small_and_unclipped_gradients_alone():
    ps = _params([0.3, 0.4])                         # norm 0.5 < 1: coefficient clamped at 1
    assert float(clip_grad_norm(ps, 1.0)) == pytest.approx(0.5) and ps[0].grad.tolist() == pytest.approx([0.3, 0.4])
    ps = _params([30.0, 40.0])
    assert float(clip_grad_norm(ps, math.inf)) == 50.0 and ps[0].grad.tolist() == [30.0, 40.0]
    no_grad = nn.Parameter(torch.ones(2))            # a parameter without a gradient is skipped
    assert float(clip_grad_norm([no_grad, *_params([6.0, 8.0])], math.inf)) == 10.0


def test_a_plain_tensor_is_its_own_full_tensor():
    t = torch.arange(3)
    assert full(t) is t


def test_rank_bytes_of_one_process_multiplied_out():
    model = nn.Linear(3, 2)                          # 6 + 2 fp32 values
    opt = torch.optim.AdamW(model.parameters())
    assert rank_bytes(model, opt) == {"weights": 8 * 4, "grads": 0, "optimizer": 0}
    model(torch.ones(1, 3)).sum().backward()
    opt.step()                                       # exp_avg and exp_avg_sq per value, plus a scalar step each
    steps = sum(s["step"].numel() * s["step"].element_size() for s in opt.state.values())
    assert rank_bytes(model, opt) == {"weights": 32, "grads": 32, "optimizer": 2 * 32 + steps}
