"""Training an MoE config: the router losses join the loss, every step records aux loss, router z-loss and the
tokens each expert got in each MoE layer, and the run store keeps them."""
from __future__ import annotations

import pytest

from engine.config import ModelConfig
from engine.presets import get_preset
from engine.train.data import load_names
from engine.train.loop import TrainConfig, train
from engine.train.small import small_version
from engine.train.store import RunStore

MOE = ModelConfig(name="tiny-moe", d_model=32, n_layers=2, n_heads=2, ffn_multiple_of=8, vocab_size=2,
                  context_length=2, norm="rmsnorm", norm_bias=False, ffn="swiglu", position="rope", bias=False,
                  n_experts=4, experts_per_token=2, z_loss_coef=1e-3, moe_first_dense=1)
FAST = TrainConfig(steps=6, batch=8, seq=8, eval_every=3, eval_batches=1, samples=0, lr=1e-2)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("store") / "runs.sqlite")
    return train(MOE, FAST, load_names(), device="cpu", store=store), store


def test_every_step_records_router_losses_and_expert_load(run):
    result, _ = run
    assert result.status == "finished" and len(result.records) == 6
    for rec in result.records:
        assert rec.aux_loss > 0 and rec.router_z_loss > 0
        assert len(rec.expert_load) == 1                       # layer 0 dense, layer 1 MoE
        assert sum(rec.expert_load[0]) == 8 * 8 * 2 and len(rec.expert_load[0]) == 4   # N*k assignments


def test_the_store_keeps_them(run):
    result, store = run
    steps = store.get_run(result.run_id)["steps"]
    assert [s["expert_load"] for s in steps] == [r.expert_load for r in result.records]
    assert [s["aux_loss"] for s in steps] == pytest.approx([r.aux_loss for r in result.records])
    assert "aux_loss" in store.export_csv(result.run_id).splitlines()[0]


def test_regularizer_is_added_to_the_loss():
    """Same seed, aux_loss_coef 0 vs 10: the router weights receive different gradients, so curves differ."""
    data = load_names()
    tc = FAST.replace(steps=3, eval_every=3)
    a = train(MOE.replace(aux_loss_coef=0.0, z_loss_coef=0.0), tc, data, device="cpu")
    b = train(MOE.replace(aux_loss_coef=10.0, z_loss_coef=0.0), tc, data, device="cpu")
    assert a.records[0].train_loss == pytest.approx(b.records[0].train_loss)   # same first forward
    assert a.records[-1].aux_loss != pytest.approx(b.records[-1].aux_loss)


def test_dense_runs_record_none():
    result = train(MOE.replace(n_experts=None), FAST.replace(steps=2, eval_every=2), load_names(), device="cpu")
    assert all(r.aux_loss is None and r.expert_load is None for r in result.records)


def test_small_version_of_mixtral_stays_moe_and_small():
    small = small_version(get_preset("mixtral-8x7b").config)
    assert small.n_experts == 8 and small.experts_per_token == 2 and small.expert_width == small.ffn_width < 1000
