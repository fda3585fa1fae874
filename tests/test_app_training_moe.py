"""Training page with an MoE preset: the run trains the small version, shows router losses and the expert-load
heatmap (figure builders tested directly, as AppTest cannot see plotly charts), and the store keeps both."""
from __future__ import annotations

import pytest

from app.charts import moe as moe_charts
from engine.train.loop import StepRecord
from engine.train.store import RunStore


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))


def moe_steps(n: int) -> list[StepRecord]:
    return [StepRecord(s, 3.0, 1e-3, 1.0, 1e4, 2.0, 3.0, aux_loss=2.0 + 0.1 * s, router_z_loss=0.5 * s,
                       expert_load=[[10, 6, 8, 8], [20, 4, 4, 4]]) for s in range(1, n + 1)]


def test_router_losses_and_expert_load_figures():
    fig = moe_charts.router_losses_figure({"A": moe_steps(3), "B": [vars(r) for r in moe_steps(2)]})
    assert list(fig.data[0].y) == pytest.approx([2.1, 2.2, 2.3]) and list(fig.data[1].y) == [0.5, 1.0, 1.5]
    assert fig.layout.xaxis.title.text == "optimizer step" and "nats" in fig.layout.yaxis2.title.text
    heat = moe_charts.expert_load_figure(moe_steps(3), "A")
    assert [list(row) for row in heat.data[0].z] == [[10, 6, 8, 8], [20, 4, 4, 4]] and heat.data[0].zmid == 8
    assert "step 3" in heat.layout.title.text and heat.layout.xaxis.title.text == "routed expert"
    assert moe_charts.has_moe({"A": moe_steps(1)}) and not moe_charts.has_moe({"A": [StepRecord(1, 3, 1, 1, 1, 1, 1)]})


def test_moe_run_on_the_page_is_stored_with_its_loads(new_app):
    at = new_app("pages/training.py", preset="mixtral-8x7b")
    at.run()
    for key, value in dict(t_steps=3, t_every=3, t_batch=4).items():
        at.number_input(key=key).set_value(value)
    at.button(key="t_start").click().run()
    assert not at.exception and not at.error
    job = at.session_state["train_job"]
    job.join(120)
    at.run()
    assert not at.exception and not at.error
    assert not job.running and job.error is None, job.error
    (r,) = job.results.values()
    assert r.status == "finished"
    steps = RunStore().get_run(r.run_id)["steps"]
    assert len(steps) == 3 and all(s["aux_loss"] is not None and len(s["expert_load"]) == 2 for s in steps)
    assert all(sum(row) == 4 * 16 * 2 for s in steps for row in s["expert_load"])   # batch*seq*k per layer
    assert any("Expert load" in c.value for c in at.caption)
