"""`python -m engine memory|flops`: JSON keys, --measure lines, refusals and bad input."""
import json

import pytest

from engine.budget.flops import flops_budget
from engine.budget.memory import memory_budget
from engine.cli import main
from engine.presets import get_preset

MEMORY_KEYS = {"weights_bytes", "grads_bytes", "optimizer_bytes", "master_bytes", "activations_bytes",
               "kv_cache_bytes", "train_total_bytes", "infer_total_bytes"}


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_memory_json_matches_engine(capsys):
    code, out, _ = run(capsys, "memory", "--preset", "gpt2", "--batch", "2", "--seq", "64", "--dtype", "fp32",
                       "--policy", "fp32", "--optimizer", "sgd", "--recompute", "selective", "--json")
    data = json.loads(out)
    assert code == 0 and MEMORY_KEYS <= set(data)
    b = memory_budget(get_preset("gpt2").config, 2, 64, "fp32", "fp32", "sgd", "selective")
    assert {k: data[k] for k in MEMORY_KEYS} == {k: getattr(b, k) for k in MEMORY_KEYS}


def test_flops_json_matches_engine(capsys):
    code, out, _ = run(capsys, "flops", "--preset", "llama-2-7b", "--seq", "128", "--json")
    data = json.loads(out)
    f = flops_budget(get_preset("llama-2-7b").config, 1, 128, causal=True)     # the headline: causal pairs
    assert code == 0 and data["causal"] is True
    for k in ("forward_flops", "backward_flops", "flops_per_token", "attention_flops"):
        assert data[k] == getattr(f, k)
    assert data["roofline"]["decode"]["bound"] == "memory"


def test_memory_measure_prints_estimate_measurement_error(capsys):
    code, out, _ = run(capsys, "memory", "--preset", "nanogpt-handout", "--seq", "4", "--dtype", "fp32",
                       "--measure")
    assert code == 0
    line = next(l for l in out.splitlines() if "activation bytes" in l)
    assert "estimate" in line and "measured" in line and "error +0.00%" in line
    assert "KV-cache bytes" in out and "peak memory: unavailable" in out


def test_flops_measure(capsys):
    code, out, _ = run(capsys, "flops", "--preset", "microgpt", "--seq", "8", "--measure", "--attention",
                       "explicit", "--json")
    m = json.loads(out)["measurements"]
    assert code == 0 and m["forward_flops"]["error_pct"] == 0 and m["backward_flops"]["error_pct"] == 0


def test_measure_refuses_with_numbers(capsys):
    code, out, err = run(capsys, "memory", "--preset", "llama-3-70b", "--seq", "2048", "--measure")
    assert code == 2 and "train_total" in out
    assert "refusing to build llama-3-70b" in err and "needs about" in err and "free" in err


@pytest.mark.parametrize("argv,field", [(["memory", "--batch", "0"], "batch"),
                                        (["flops", "--preset", "gpt2", "--seq", "5000"], "seq"),
                                        (["memory", "--d-model", "-3"], "d_model"),
                                        (["flops", "--preset", "nope"], "preset")])
def test_bad_input_exits_2_naming_the_field(capsys, argv, field):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.startswith("error: ") and field in err and "Traceback" not in err
