"""A hybrid against a transformer of equal parameters (issue 23, app item 7): the transformer solved by
engine/sweep/hold.py equal_params_transformer, pinned on Compare, and trained A/B on the same data from the
Training page and the CLI (`train --ab "transformer vs hybrid"`), both curves stored."""
from __future__ import annotations

import json

import pytest

from app.compare_view import compare_metrics
from engine.budget.memory import state_bytes
from engine.budget.params import count_params
from engine.cli import main
from engine.presets import PRESETS
from engine.sweep.hold import d_ff_step, equal_params_transformer
from engine.train.jobs import ab_configs
from engine.train.small import small_version
from engine.train.store import RunStore

QWEN = PRESETS["qwen3-next-80b-a3b"].config
AB = "transformer vs hybrid"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))


def test_equal_params_transformer_dense_ffn():
    """Qwen3.5-9B has dense FFNs: d_ff is solved, the total within half a step of d_ff's ffn_multiple_of grid."""
    cfg = PRESETS["qwen3.5-9b"].config
    t = equal_params_transformer(cfg)
    assert set(t.layer_types) == {"full"} and sum(state_bytes(t, 1).values()) == 0
    assert abs(count_params(t).total - count_params(cfg).total) <= d_ff_step(t) / 2
    assert t.d_ff != cfg.d_ff and t.ffn_types == cfg.ffn_types


def test_equal_params_transformer_every_layer_moe():
    """Qwen3-Next is MoE everywhere: the experts' width is solved; one unit of it is 48 layers x 512 experts x 3
    matrices x d_model 2,048 parameters, and the total lands within half of that."""
    t = equal_params_transformer(QWEN)
    unit = 48 * 512 * 3 * 2048
    assert t.d_ff == QWEN.d_ff and t.expert_d_ff == 514
    assert abs(count_params(t).total - 79_674_391_296) <= unit / 2
    assert t.name == "qwen3-next-80b-a3b as a transformer (equal parameters)"


def test_compare_metrics_show_the_state_only_with_a_hybrid():
    t = equal_params_transformer(QWEN)
    v = compare_metrics({"hybrid": QWEN, "transformer": t})
    assert v["memory"]["KV cache"] == [24_576 * 262_144, 98_304 * 262_144]
    assert v["memory"]["recurrent state"][0] == sum(state_bytes(QWEN, 1).values()) and \
        v["memory"]["recurrent state"][1] == 0
    assert "recurrent state" not in compare_metrics({"gpt2": PRESETS["gpt2"].config})["memory"]


def test_ab_pair_is_a_hybrid_and_its_equal_transformer():
    pair = ab_configs(small_version(PRESETS["gpt2"].config), AB)
    (tl, t), (hl, h) = pair.items()
    assert tl.startswith("transformer") and hl == "hybrid (1 attention of 2, Gated DeltaNet)"
    assert h.layer_types == ("gdn", "full") and t.layer_types == ("full", "full")
    assert abs(count_params(t).total - count_params(h).total) <= d_ff_step(t) / 2


@pytest.mark.parametrize("n, label, layers", [
    (6, "hybrid (1 attention of 6, Gated DeltaNet)", "gdn gdn gdn gdn gdn full"),          # 6 / 4 rounds down
    (8, "hybrid (2 attention of 8, Gated DeltaNet)", "gdn gdn gdn full gdn gdn gdn full")])  # a whole count: "2"
def test_a_hybrid_has_one_attention_layer_in_four_rounded_down(n, label, layers):
    """The label the page and the CLI show names a whole number of attention layers, and the layout holds that
    many, spread evenly."""
    (_, t), (hl, h) = ab_configs(small_version(PRESETS["gpt2"].config, n_layers=n), AB).items()
    assert (hl, " ".join(h.layer_types)) == (label, layers) and t.layer_types == ("full",) * n


def test_compare_pins_the_transformer(new_app):
    at = new_app("pages/compare.py", preset="qwen3-next-80b-a3b")
    at.run(timeout=120)
    assert not at.exception
    at.button(key="cmp_transformer_equal").click().run(timeout=120)
    assert not at.exception
    assert [label for label, _ in at.session_state["pins"]][-1] == \
        "qwen3-next-80b-a3b as a transformer (equal parameters)"


def test_cli_trains_both_and_stores_both_curves(capsys):
    rc = main(["train", "--small", "--ab", AB, "--steps", "6", "--eval-every", "3", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["comparison"] == AB
    runs = out["runs"]
    assert list(runs) == ["transformer (equal params)", "hybrid (1 attention of 2, Gated DeltaNet)"]
    assert all(r["status"] == "finished" and r["steps"] == 6 for r in runs.values())
    store = RunStore()
    assert {r["id"] for r in store.list_runs()} == {r["id"] for r in runs.values()}
    for (label, r), layout in zip(runs.items(), [("full", "full"), ("gdn", "full")]):
        run = store.get_run(r["id"])
        assert [s["step"] for s in run["steps"] if s["step"] >= 1] == list(range(1, 7)), label   # each curve
        assert run["model_config"].layer_types == layout


def test_cli_rejects_an_unknown_comparison(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--ab", "mamba vs attention"])
    assert "--ab" in capsys.readouterr().err


def test_training_page_runs_the_pair(new_app):
    at = new_app("pages/training.py", preset="qwen3.5-9b")
    at.run(timeout=120)
    for key, value in {"t_steps": 6, "t_every": 3}.items():
        at.number_input(key=key).set_value(value)
    at.selectbox(key="t_ab").set_value(AB)
    at.button(key="t_start").click().run()
    job = at.session_state["train_job"]
    job.join(300)
    at.run(timeout=120)
    assert not at.exception and list(job.results) == ["transformer (equal params)",
                                                      "hybrid (1 attention of 2, Gated DeltaNet)"]
    assert all(r.status == "finished" for r in job.results.values())
    assert len(RunStore().list_runs()) == 2
    assert at.multiselect(key="t_chosen").value == [r.run_id for r in job.results.values()]   # both overlaid
