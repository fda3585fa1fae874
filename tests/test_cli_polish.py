"""CLI polish: "did you mean" for presets, commands, flags and choices; bench fits its default sequence to the
context; a refusal exits 2."""
import json

import pytest

from engine.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as e:   # argparse usage errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv,hint", [
    (["params", "--preset", "llama3-8b"], "(did you mean llama-3-8b?)"),
    (["param", "--preset", "gpt2"], "(did you mean params?)"),
    (["params", "--n_kv_heads", "4"], "--n_kv_heads (did you mean --n-kv-heads?) 4"),
    (["params", "--n-kv-haeds=4"], "--n-kv-haeds=4 (did you mean --n-kv-heads?)"),
    (["import_hf", "x"], "(did you mean import-hf?)"),
    (["memory", "--dtype", "bf61"], "(did you mean bf16?)"),
])
def test_did_you_mean(capsys, argv, hint):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and not out and hint in err and "Traceback" not in err


def test_no_suggestion_for_nothing_alike(capsys):
    rc, _, err = run(capsys, "params", "--preset", "zzzzzz")
    assert rc == 2 and "did you mean" not in err


def test_bench_default_sequence_fits_the_context(capsys):
    rc, out, err = run(capsys, "bench", "--preset", "microgpt", "--mode", "train", "--time-budget", "0.02", "--json")
    assert rc == 0, err
    assert json.loads(out)["seq"] == 16   # microgpt's context_length (the default 128 does not fit)
    rc, out, _ = run(capsys, "bench", "--preset", "gpt2", "--n-layers", "1", "--time-budget", "0.02", "--json")
    assert rc == 0 and json.loads(out)["seq"] == 128


def test_explicit_sequence_beyond_the_context_is_refused_with_exit_2(capsys):
    rc, _, err = run(capsys, "bench", "--preset", "microgpt", "--seq", "17")
    assert rc == 2 and "seq: 17 exceeds context_length=16" in err
