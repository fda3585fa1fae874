"""`python -m engine train / runs / bench` acceptance: a 150-step run learns and is listed; absurd lr diverges."""
from __future__ import annotations

import json

import pytest

from engine.cli import main


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))


def run_json(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


def test_150_steps_on_names_lower_the_loss_by_a_fifth_and_are_listed(capsys):
    rc, r, _ = run_json(capsys, "train", "--steps", "150", "--json")
    assert rc == 0 and r["status"] == "finished" and r["processes"] == 1
    assert r["final_loss"] <= 0.8 * r["initial_loss"], r
    assert r["tokens_per_s"] > 0 and len(r["samples"]) == 8
    rc, runs, _ = run_json(capsys, "runs", "--json")
    assert rc == 0 and [(x["id"], x["status"], x["steps"]) for x in runs] == [(r["id"], "finished", 150)]
    assert main(["runs"]) == 0 and f"{r['id']}  finished" in capsys.readouterr().out
    assert main(["runs", "--csv", str(r["id"])]) == 0
    rows = capsys.readouterr().out.splitlines()   # header, the step-0 validation row, then the 150 steps
    assert len(rows) == 152 and rows[1].startswith("0,,") and rows[-1].startswith("150,")


def test_absurd_lr_prints_a_clear_message_and_no_traceback(capsys):
    rc, r, err = run_json(capsys, "train", "--steps", "20", "--lr", "1e4", "--json")
    assert rc == 1 and r["status"] == "diverged" and r["final_loss"] is None
    assert err.startswith("error: diverged at step") and "Traceback" not in err
    assert main(["train", "--steps", "20", "--lr", "1e4"]) == 1
    out, err = capsys.readouterr()
    assert "diverged" in out and "error: diverged" in err


def test_preset_small_and_field_flags(capsys):
    rc, r, _ = run_json(capsys, "train", "--preset", "llama-3-8b", "--small", "--n-layers", "1", "--steps", "2",
                        "--samples", "0", "--json")
    assert rc == 0 and r["steps"] == 2
    from engine.train.store import RunStore
    cfg = RunStore().get_run(r["id"])["model_config"]
    assert (cfg.n_layers, cfg.d_model, cfg.ffn, cfg.attention_kind) == (1, 64, "swiglu", "GQA-2")


@pytest.mark.parametrize("argv, message", [
    (["train", "--steps", "0"], "error: steps: 0 is not an integer >= 1"),
    (["train", "--data", "/no/such/file"], "error: data: cannot read"),
    (["train", "--n-kv-heads", "3"], "error: n_kv_heads"),
    (["runs", "--delete", "99"], "error: run 99 does not exist"),
    (["runs", "--csv", "99"], "error: run 99 does not exist"),
])
def test_bad_input_exits_2_with_a_message(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and "Traceback" not in err


def test_runs_on_an_empty_store(capsys):
    assert main(["runs"]) == 0 and "no runs stored" in capsys.readouterr().out
