"""`python -m engine presets | params | export`: the same contract the app uses.

Most cases call engine.cli.main in-process (a subprocess costs ~2 s of torch import); four real subprocesses
check the entry point, exit status, the stderr/stdout split and a shell pipe.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.budget.params import COMPONENTS, count_params
from engine.cli import main
from engine.config import ModelConfig
from engine.presets import PRESETS
from tests.helpers import SUBPROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[1]


def engine(*args: str, stdin: str | None = None, shell: str | None = None) -> subprocess.CompletedProcess:
    cmd = shell if shell else [sys.executable, "-m", "engine", *args]
    return subprocess.run(cmd, cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=SUBPROCESS_WAIT_S,
                          shell=bool(shell), env={**os.environ, "PYTHONPATH": str(ROOT)})


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        rc = main(list(args))
    except SystemExit as e:                      # argparse usage errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


# ---- real subprocesses ---------------------------------------------------------------------------------------
def test_presets_json_subprocess():
    r = engine("presets", "--json")
    assert r.returncode == 0 and r.stderr == ""
    rows = json.loads(r.stdout)
    assert [row["name"] for row in rows] == list(PRESETS)
    assert {row["name"]: row["total_params"] for row in rows}["llama-2-7b"] == 6_738_415_616


def test_params_table_subprocess():
    r = engine("params", "--preset", "llama-3-8b")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("llama-3-8b: 8,030,261,248 parameters")
    for name in COMPONENTS:
        assert f"  {name} " in r.stdout


def test_export_piped_into_params_subprocess():
    r = engine(shell=f"{sys.executable} -m engine export --preset gemma-2-2b | "
                     f"{sys.executable} -m engine params --config /dev/stdin --json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["total_params"] == PRESETS["gemma-2-2b"].reference_params


def test_malformed_config_subprocess(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("n_layer: 2\nn_heads: 12\nn_kv_heads: 5\nnorm: batchnorm\n")
    r = engine("params", "--config", str(bad))
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == ["error: unknown key `n_layer` (did you mean n_layers?)",
                                     "error: norm: 'batchnorm' is not one of layernorm, rmsnorm",
                                     "error: n_kv_heads: 5 does not divide n_heads=12"]


# ---- in-process ------------------------------------------------------------------------------------------------
def test_presets_text(capsys):
    rc, out, _ = run(capsys, "presets")
    assert rc == 0 and len(out.splitlines()) == len(PRESETS)
    assert "124,439,808" in out.splitlines()[0] and out.splitlines()[0].startswith("gpt2 ")


@pytest.mark.parametrize("name", ["gpt2", "qwen3-0.6b", "microgpt"])
def test_params_json_is_the_closed_form(capsys, name):
    rc, out, _ = run(capsys, "params", "--preset", name, "--json")
    data = json.loads(out)
    assert rc == 0 and data == count_params(PRESETS[name].config).as_dict()
    assert isinstance(data["total_params"], int) and isinstance(data["non_embedding_params"], int)
    assert set(data["components"]) == set(COMPONENTS) and sum(data["components"].values()) == data["total_params"]


def test_params_table_lists_every_component_with_its_share(capsys):
    rc, out, _ = run(capsys, "params", "--preset", "nanogpt-handout")
    lines = out.splitlines()
    assert rc == 0 and lines[0] == "nanogpt-handout: 1,872 parameters (1,764 non-embedding)"  # minus 60 + 48
    assert lines[-1] == "tying the embedding and output head saves 60"
    assert any(line.split() == ["ffn", "1,152", "61.54%"] for line in lines)


def test_field_flags_override_the_preset(capsys):
    rc, out, _ = run(capsys, "params", "--preset", "nanogpt-handout", "--tie-embeddings", "false", "--json")
    assert rc == 0 and json.loads(out)["total_params"] == 1_932
    rc, out, _ = run(capsys, "export", "--n-kv-heads", "4", "--position", "rope")
    cfg = ModelConfig.from_yaml(out)
    assert rc == 0 and (cfg.n_kv_heads, cfg.position, cfg.d_model) == (4, "rope", 768)


@pytest.mark.parametrize("name", PRESETS)
def test_export_round_trips_through_a_file(capsys, tmp_path, name):
    rc, out, _ = run(capsys, "export", "--preset", name)
    assert rc == 0 and ModelConfig.from_yaml(out) == PRESETS[name].config
    path = tmp_path / "cfg.yaml"
    path.write_text(out)
    rc, out, _ = run(capsys, "params", "--config", str(path), "--json")
    assert rc == 0 and json.loads(out)["total_params"] == PRESETS[name].reference_params


# (id, YAML file content or None, extra arguments, text that must appear on stderr: the field or source named)
MALFORMED = [
    ("yaml-syntax", "d_model: [768\n", [], "error: yaml: not valid YAML at line 2"),
    ("yaml-indent", "d_model: 768\n  n_layers: 2\n", [], "error: yaml: not valid YAML at line 2"),
    ("empty-file", "", [], "error: yaml: the document is empty"),
    ("list-document", "- d_model: 768\n", [], "error: yaml: expected a mapping"),
    ("scalar-document", "gpt2\n", [], "error: yaml: expected a mapping"),
    ("python-tag", "name: !!python/object/apply:os.system [echo hi]\n", [], "python/object/apply:os.system"),
    ("unknown-key", "n_layer: 2\n", [], "unknown key `n_layer` (did you mean n_layers?)"),
    ("wrong-type", "d_model: wide\n", [], "error: d_model: 'wide' is not an integer >= 1"),
    ("float-for-int", "n_layers: 2.5\n", [], "error: n_layers: 2.5 is not an integer >= 1"),
    ("bool-typo", "tie_embeddings: maybe\n", [], "error: tie_embeddings: 'maybe' is not true or false"),
    ("null-size", "vocab_size: null\n", [], "error: vocab_size: null is not an integer >= 1"),
    ("out-of-range", "dropout: 1.5\n", [], "error: dropout: 1.5 is not a number >= 0 and < 1"),
    ("zero-layers", "n_layers: 0\n", [], "error: n_layers: 0 is not an integer >= 1"),
    ("nan", "rope_fraction: .nan\n", [], "error: rope_fraction: nan is not a number > 0 and <= 1"),
    ("bad-choice", "norm: batchnorm\n", [], "error: norm: 'batchnorm' is not one of layernorm, rmsnorm"),
    ("kv-heads", "n_heads: 32\nn_kv_heads: 5\n", [], "error: n_kv_heads: 5 does not divide n_heads=32"),
    ("odd-rotary", "position: rope\nhead_dim: 7\n", [], "error: head_dim: rope needs an even rotary width"),
    ("rmsnorm-bias", "norm: rmsnorm\nnorm_bias: true\n", [], "error: norm_bias: rmsnorm has no bias"),
    ("missing-file", None, ["--config", "/nonexistent/cfg.yaml"], "error: config: cannot read /nonexistent"),
    ("directory", None, ["--config", "/"], "error: config: cannot read /: Is a directory"),
    ("not-utf8", b"\xff\xfe\xa0 binary", [], "error: config: cannot read"),
    ("unknown-preset", None, ["--preset", "gpt3"], "error: preset: 'gpt3' is not one of gpt2,"),
    ("bad-flag-value", None, ["--d-model", "wide"], "error: d_model: 'wide' is not an integer >= 1"),
    ("flag-breaks-rule", None, ["--preset", "llama-3-8b", "--n-kv-heads", "5"], "error: n_kv_heads: 5 does not"),
    ("preset-and-config", None, ["--preset", "gpt2", "--config", "x.yaml"], "not allowed with argument"),
]


@pytest.mark.parametrize("command", ["params", "export"])
@pytest.mark.parametrize("case, content, extra, expected", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_exits_2_naming_the_field(capsys, tmp_path, command, case, content, extra, expected):
    args = [command, *extra]
    if content is not None:
        path = tmp_path / "cfg.yaml"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        args += ["--config", str(path)]
    rc, out, err = run(capsys, *args)
    assert rc == 2 and out == "" and "Traceback" not in err
    assert expected in err, err
