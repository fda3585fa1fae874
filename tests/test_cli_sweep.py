"""`python -m engine sweep`: rows held against `params` of the same config, the KV formula, equal-parameter
tolerance, CSV shape, and bad input naming the flag with exit status 2."""
from __future__ import annotations

import csv
import io
import json

from engine.cli import main
from engine.config import ModelConfig
from engine.presets import get_preset


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        rc = main(list(args))
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_kv_heads_json_rows_match_params_and_kv_is_proportional(capsys):
    rc, out, _ = run(capsys, "sweep", "--preset", "llama-3-8b", "--knob", "n_kv_heads", "--values", "1,2,4,8,32",
                     "--json")
    assert rc == 0
    rows = json.loads(out)["rows"]
    assert [r["n_kv_heads"] for r in rows] == [1, 2, 4, 8, 32]
    for r in rows:
        rc, params_out, _ = run(capsys, "params", "--preset", "llama-3-8b", "--n-kv-heads", str(r["n_kv_heads"]),
                                "--json")
        assert rc == 0 and r["total_params"] == json.loads(params_out)["total_params"]
        assert r["kv_cache_bytes"] == r["n_kv_heads"] * rows[0]["kv_cache_bytes"]     # proportional to KV heads
    assert rows[0]["kv_cache_bytes"] == 2 * 32 * 8192 * 128 * 2                        # MQA: 128 MiB


def test_equal_parameter_rows_within_one_ffn_multiple_of_step(capsys):
    rc, out, _ = run(capsys, "sweep", "--preset", "llama-3-8b", "--knob", "ffn", "--hold", "d_ff", "--json")
    assert rc == 0
    data = json.loads(out)
    base = get_preset("llama-3-8b").config
    assert data["target"] == 8_030_261_248 and len(data["rows"]) == 9   # 4 dense + 5 gated FFN choices
    for r in data["rows"]:
        cfg = base.replace(ffn=r["ffn"], d_ff=r["d_ff"])
        step = base.ffn_multiple_of * base.n_layers * (3 if cfg.gated else 2) * base.d_model   # no biases
        assert abs(r["total_params"] - data["target"]) <= step
        assert r["d_ff"] % base.ffn_multiple_of == 0


def test_csv_has_a_header_and_one_line_per_point(capsys):
    rc, out, err = run(capsys, "sweep", "--preset", "gpt2", "--knob", "n_kv_heads", "--values", "1,5,12", "--csv")
    assert rc == 0 and "1 of 3 points are invalid" in err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["n_kv_heads"] for r in rows] == ["1", "5", "12"]
    assert rows[1]["valid"] == "False" and rows[1]["problems"] == "n_kv_heads: 5 does not divide n_heads=12"
    assert int(rows[2]["total_params"]) == 124_439_808


def test_table_lists_invalid_points_and_two_knobs(capsys):
    rc, out, _ = run(capsys, "sweep", "--preset", "gpt2", "--knob", "n_layers", "--values", "6,12", "--knob",
                     "norm", "--values", "layernorm,rmsnorm", "--norm-bias", "false")
    assert rc == 0
    assert "n_layers=12, norm=layernorm" in out and "124,439,808" not in out   # norm_bias false changes the count
    assert out.count("\n  n_layers=") == 4


def test_small_sweeps_the_training_size(capsys):
    rc, out, _ = run(capsys, "sweep", "--preset", "llama-3-8b", "--small", "--knob", "n_kv_heads", "--json")
    assert rc == 0
    assert [r["n_kv_heads"] for r in json.loads(out)["rows"]] == [1, 2, 4]             # 4 heads at the small size


def test_bad_input_exits_2_naming_the_flag(capsys):
    cases = [(("--knob", "n_kv_head"), "--knob: 'n_kv_head' is not a config field"),
             (("--knob", "n_kv_heads", "--values", "1,x"), "--values: n_kv_heads: 'x' is not an integer"),
             (("--knob", "d_ff", "--hold", "d_ff"), "--hold: cannot solve for d_ff"),
             (("--knob", "ffn", "--context", "0"), "--context: 0 is not an integer >= 1"),
             (("--knob", "ffn", "--values", "relu", "--values", "gelu"), "--values: 2 lists for 1 --knob"),
             (("--knob", "ffn", "--measure", "speed"), "--measure: 'speed' is not one of latency, loss"),
             (("--knob", "ffn", "--measure", "latency", "--latency-seq", "0"), "--latency-seq: 0 is not an integer"),
             (("--knob", "ffn", "--measure", "latency", "--time-budget", "0"), "--time-budget: 0.0 is not a number > 0"),
             (("--knob", "ffn", "--n-heads", "0"), "n_heads: 0 is not an integer >= 1")]
    for args, message in cases:
        rc, out, err = run(capsys, "sweep", "--preset", "gpt2", *args)
        assert rc == 2 and message in err and "Traceback" not in err, (args, err)


def test_default_config_sweep(capsys):
    rc, out, _ = run(capsys, "sweep", "--knob", "tie_embeddings", "--json")
    assert rc == 0
    rows = json.loads(out)["rows"]
    assert [r["tie_embeddings"] for r in rows] == [False, True]
    assert rows[0]["total_params"] - rows[1]["total_params"] == ModelConfig().vocab_size * 768
