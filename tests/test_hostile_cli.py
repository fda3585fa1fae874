"""Hostile input to the CLI, table-driven: every case exits 2 with one `error: ...` message naming the field,
flag, file or key, and never a traceback. Cases run in-process (engine.cli.main) and fail before any model is
built, so the whole table takes seconds."""
from __future__ import annotations

import json
import math
import os

import pytest

from engine.cli import main
from engine.config import FIELDS
from engine.limits import MAX_CONFIG_BYTES, MAX_DEPTH, MAX_INT

INT_FIELDS = [n for n, s in FIELDS.items() if s.type is int]
FLOAT_FIELDS = [n for n, s in FIELDS.items() if s.type is float]
CHOICE_FIELDS = [n for n, s in FIELDS.items() if s.choices]
BOOL_FIELDS = [n for n, s in FIELDS.items() if s.type is bool]
BAD_INTS = ["0", "-1", "1e3000", "abc", str(MAX_INT + 1), "1.5"]
BAD_FLOATS = ["nan", "inf", "-1", "abc", "1e400"]


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


FIELD_CASES = ([(["params", flag(n), v], f"{n}:") for n in INT_FIELDS for v in BAD_INTS
                if not (v == "0" and FIELDS[n].lo is not None and FIELDS[n].lo <= 0)]
               + [(["params", flag(n), v], f"{n}:") for n in FLOAT_FIELDS for v in BAD_FLOATS]
               + [(["params", flag(n), "bogus"], f"{n}:") for n in CHOICE_FIELDS]
               + [(["params", flag(n), "maybe"], f"{n}:") for n in BOOL_FIELDS])

TRAIN = ["train", "--steps", "1"]
RUN_CASES = [
    (TRAIN + ["--lr", "inf"], "lr:"), (TRAIN + ["--lr", "nan"], "lr:"), (TRAIN + ["--lr", "0"], "lr:"),
    (TRAIN + ["--lr", "-1"], "lr:"), (TRAIN + ["--weight-decay", "inf"], "weight_decay:"),
    (TRAIN + ["--weight-decay", "nan"], "weight_decay:"), (TRAIN + ["--weight-decay", "-1"], "weight_decay:"),
    (TRAIN + ["--z-loss", "inf"], "z_loss:"), (TRAIN + ["--z-loss", "nan"], "z_loss:"),
    (TRAIN + ["--grad-clip", "inf"], "grad_clip:"), (TRAIN + ["--min-lr-ratio", "2"], "min_lr_ratio:"),
    (TRAIN + ["--seed", "-1"], "seed:"), (TRAIN + ["--seed", str(2**60)], "seed:"),
    (TRAIN + ["--seq", "100000"], "seq:"), (TRAIN + ["--seq", "1"], "seq:"), (TRAIN + ["--batch", "0"], "batch:"),
    (["train", "--steps", "0"], "steps:"), (TRAIN + ["--eval-every", "0"], "eval_every:"),
    (TRAIN + ["--batch", "1000000000"], "batch="), (TRAIN + ["--preset", "llama-3-70b"], "refusing to build"),
    (TRAIN + ["--data", "/dev/zero"], "data:"), (TRAIN + ["--data", "/nonexistent/file.txt"], "data:"),
    (TRAIN + ["--data", "/"], "data:"), (TRAIN + ["--device", "tpu"], "device:"),
    (TRAIN + ["--device", "meta"], "device:"), (TRAIN + ["--device", "cuda:99"], "device:"),
    (TRAIN + ["--device", ""], "device:"),
    (["bench", "--device", "tpu"], "device:"), (["bench", "--device", "meta"], "device:"),
    (["bench", "--time-budget", "nan"], "time_budget:"), (["bench", "--time-budget", "inf"], "time_budget:"),
    (["bench", "--time-budget", "0"], "time_budget:"), (["bench", "--time-budget", "-1"], "time_budget:"),
    (["bench", "--batch", "0"], "batch:"), (["bench", "--seq", "0"], "seq:"), (["bench", "--seq", "4096"], "seq:"),
    (["bench", "--dtype", "int8"], "dtype:"), (["bench", "--mode", "sideways"], "mode:"),
    (["bench", "--attn-softcap", "50", "--n-heads", "2000", "--head-dim", "1", "--d-model", "64", "--n-layers", "1",
      "--batch", "64", "--seq", "4096", "--position", "none"], "batch=64"),
    (["memory", "--batch", "0"], "batch:"), (["memory", "--seq", "0"], "seq:"), (["flops", "--seq", "4096"], "seq:"),
    (["flops", "--measure", "--d-model", str(MAX_INT), "--n-heads", "1"], "refusing to build"),
]


def _deep_yaml(levels: int) -> str:
    return "".join(" " * i + "a:\n" for i in range(levels))


BOMB = ("defs:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9))
        + "vocab_size: *a8\n")
YAML_CASES = [   # (file content, what the message names)
    (_deep_yaml(300), "nested"), ("name: " + "[" * 1200 + "]" * 1200 + "\n", "nested"),
    ("d_model: 64\nd_model: 128\n", "duplicate key `d_model`"), ("n_layers: 2\nname: a\nn_layers: 3\n", "n_layers"),
    (f"d_model: {'9' * 5000}\n", "digit integer"), (f"d_model: {MAX_INT + 1}\n", "d_model:"),
    ("n_layers: 1000000000\n", "n_layers:"), (BOMB, "vocab_size:"), ("d_model: !!python/object:os.system [x]\n", "yaml:"),
    ("x" * (MAX_CONFIG_BYTES + 1), "larger than the limit"), ("", "empty"), ("- 1\n- 2\n", "got a list"),
    ("42\n", "single value"), ("d_modle: 64\n", "d_modle"), ("name: [1, 2]\n", "name:"), ("ffn: {a: 1}\n", "ffn:"),
    ("dropout: .nan\n", "dropout:"), ("rope_base: .inf\n", "rope_base:"), ("d_model: [1, 2\n", "not valid YAML"),
    ("n_heads: 1e400\n", "n_heads:"),
]

LLAMA = dict(model_type="llama", hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=128,
             vocab_size=100)
HF_CASES = [   # (config.json text, extra files {name: text}, what the message names)
    ('{"a":' * 1200 + "1" + "}" * 1200, {}, "nested"),
    (json.dumps({"model_type": ["llama"]}), {}, "model_type:"),
    (json.dumps({**LLAMA, "num_hidden_layers": 10**9}), {}, "num_hidden_layers:"),
    (json.dumps(LLAMA)[:-1] + ', "rms_norm_eps": 1' + "0" * 400 + ".5}", {}, "rms_norm_eps:"),
    (json.dumps(LLAMA)[:-1] + ', "vocab_size": ' + "9" * 5000 + "}", {}, "digit integer"),
    (json.dumps(LLAMA)[:-1] + ', "rope_theta": NaN}', {}, "rope_theta: nan"),   # read as json reads it; not finite
    (json.dumps(LLAMA)[:-1] + ', "rms_norm_eps": -Infinity}', {}, "rms_norm_eps: -inf"),
    (json.dumps({**LLAMA, "hidden_size": "big"}), {}, "hidden_size:"),
    (json.dumps({**LLAMA, "hidden_size": 2**60}), {}, "hidden_size:"),
    (json.dumps({**LLAMA, "tie_word_embeddings": "yes"}), {}, "tie_word_embeddings:"),
    (json.dumps({**LLAMA, "hidden_act": 3}), {}, "hidden_act:"),
    (json.dumps({**LLAMA, "rope_scaling": [1, 2]}), {}, "rope_scaling:"),
    (json.dumps({**LLAMA, "rope_parameters": {"rope_theta": "big"}}), {}, "rope_parameters.rope_theta:"),
    (json.dumps({**LLAMA, "model_type": "qwen2", "layer_types": "full"}), {}, "layer_types:"),
    (json.dumps({**LLAMA, "num_attention_heads": True}), {}, "num_attention_heads:"),
    (json.dumps([1, 2]), {}, "config.json"), ("{not json", {}, "config.json"), ("", {}, "config.json"),
    (" " * (MAX_CONFIG_BYTES + 1), {}, "config.json"),
    (json.dumps(LLAMA), {"model.safetensors.index.json": "[1, 2]"}, "weight_map"),
    (json.dumps(LLAMA), {"model.safetensors.index.json": json.dumps({"weight_map": {"a": "../../etc/passwd"}})},
     "outside the model folder"),
    (json.dumps(LLAMA), {"model.safetensors.index.json": json.dumps({"weight_map": {"a": "/etc/passwd"}})},
     "outside the model folder"),
    (json.dumps(LLAMA), {"model.safetensors.index.json": json.dumps({"weight_map": {"a": 7}})}, "weight_map"),
    (json.dumps(LLAMA), {"model.safetensors.index.json": '{"weight_map": ' * 100 + "}" * 100}, "nested"),
]
HF_FLAG_CASES = [(["--check", "--tol", "nan"], "--tol"), (["--check", "--tol", "-1"], "--tol"),
                 (["--check", "--tol", "inf"], "--tol"), (["--check", "--tokens", "0"], "--tokens"),
                 (["--check", "--tokens", str(10**9)], "--tokens")]


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as e:   # argparse's own refusals (an int flag given "abc") also exit 2
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(capsys, argv: list[str], named: str) -> None:
    code, out, err = run(capsys, argv)
    assert code == 2, (argv, code, out[-300:], err[-300:])
    assert "Traceback" not in out + err, (argv, err)
    assert named in err, (argv, err)


def test_the_suite_has_at_least_150_cases():
    total = (len(FIELD_CASES) + len(RUN_CASES) + len(YAML_CASES) + len(HF_CASES) + len(HF_FLAG_CASES)
             + len(STORE_CASES))
    assert total >= 150, total


@pytest.mark.parametrize("argv,named", FIELD_CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_field_flags(capsys, argv, named):
    assert_refused(capsys, argv, named)


@pytest.mark.parametrize("argv,named", RUN_CASES, ids=lambda v: " ".join(v)[:60] if isinstance(v, list) else None)
def test_train_bench_budget_flags(capsys, tmp_path, argv, named):
    assert_refused(capsys, argv, named)


@pytest.mark.parametrize("text,named", YAML_CASES, ids=[f"yaml{i}" for i in range(len(YAML_CASES))])
def test_yaml_config_files(capsys, tmp_path, text, named):
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    assert_refused(capsys, ["params", "--config", str(path)], named)


@pytest.mark.parametrize("source,named", [("/dev/zero", "larger than the limit"), ("/", "cannot read"),
                                          ("/nonexistent.yaml", "cannot read")])
def test_config_paths_that_never_end_or_do_not_exist(capsys, source, named):
    assert_refused(capsys, ["params", "--config", source], named)


def test_training_text_too_short_for_the_sequence(capsys, tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("the quick brown fox " * 8)   # 160 characters: a 16-token val split
    assert_refused(capsys, TRAIN + ["--data", str(path)], "seq:")
    path.write_bytes(bytes(range(256)))
    assert_refused(capsys, TRAIN + ["--data", str(path)], "data:")


@pytest.mark.parametrize("text,files,named", HF_CASES, ids=[f"hf{i}" for i in range(len(HF_CASES))])
def test_import_hf_folders(capsys, tmp_path, text, files, named):
    (tmp_path / "config.json").write_text(text)
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    assert_refused(capsys, ["import-hf", str(tmp_path), "--check"], named)


@pytest.mark.parametrize("flags,named", HF_FLAG_CASES)
def test_import_hf_check_flags(capsys, tmp_path, flags, named):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    code, out, err = run(capsys, ["import-hf", str(tmp_path), *flags])
    assert code == 2 and named in err and out == "", (flags, err)


def test_import_hf_config_json_that_is_dev_zero(capsys, tmp_path):
    os.symlink("/dev/zero", tmp_path / "config.json")
    assert_refused(capsys, ["import-hf", str(tmp_path)], "larger than the limit")


def _foreign(path):
    import sqlite3
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE contacts (name TEXT)")


STORE_CASES = [   # (how the file is spoiled, what the message says)
    (lambda p: p.write_bytes(b""), "is empty (0 bytes)"),
    (lambda p: p.write_bytes(b"not a database at all" * 100), "not a readable SQLite database"),
    (_foreign, "another program's SQLite database"),
    (lambda p: p.mkdir(), "is a folder"),
]


def _truncated(path) -> None:
    """A real store, cut after its first page."""
    from engine.train.store import RunStore
    full = path.with_name("full.sqlite")
    RunStore(full)
    import sqlite3
    with sqlite3.connect(full) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    path.write_bytes(full.read_bytes()[:3000])


STORE_CASES.append((_truncated, "not a readable SQLite database"))


@pytest.mark.parametrize("spoil,named", STORE_CASES, ids=["empty", "garbage", "foreign", "folder", "truncated"])
@pytest.mark.parametrize("argv", [["runs"], ["runs", "--json"], ["runs", "--csv", "1"], ["runs", "--delete", "1"],
                                  ["train", "--steps", "1", "--small", "--batch", "2"]])
def test_unusable_run_store(capsys, tmp_path, monkeypatch, spoil, named, argv):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))
    path = tmp_path / "runs.sqlite"
    spoil(path)
    before = path.read_bytes() if path.is_file() else None
    code, out, err = run(capsys, argv)
    assert code == 2 and str(path) in err and named in err and "Traceback" not in err, (argv, err)
    assert "move it aside" in err or "rename it" in err
    assert (path.read_bytes() if path.is_file() else None) == before   # never modified, never deleted


def test_move_aside_renames_and_a_new_store_starts(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))
    (tmp_path / "runs.sqlite").write_bytes(b"garbage" * 100)
    code, out, _ = run(capsys, ["runs", "--move-aside"])
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("runs.sqlite.unusable-")]
    assert code == 0 and len(moved) == 1 and moved[0].read_bytes() == b"garbage" * 100 and str(moved[0]) in out
    assert run(capsys, ["runs"])[0] == 0


def test_unwritable_store_names_the_file(capsys, tmp_path, monkeypatch):
    """As root a chmod does not stop writes, so sqlite's own read-only error is injected."""
    import sqlite3

    from engine.train import store
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))
    real = sqlite3.connect

    def readonly(path, *a, **kw):
        db = real(path, *a, **kw)
        db.execute("PRAGMA query_only=ON")
        return db

    monkeypatch.setattr(store.sqlite3, "connect", readonly)
    code, _, err = run(capsys, ["runs"])
    assert code == 2 and str(tmp_path / "runs.sqlite") in err and "cannot be written" in err


def test_deleting_a_running_run_is_refused(capsys, tmp_path, monkeypatch):
    from engine.config import ModelConfig
    from engine.train.loop import TrainConfig
    from engine.train.store import RunStore
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))
    rid = RunStore().create_run(ModelConfig(), TrainConfig(), "names", 1, "cpu", initial_loss=3.5)   # this process
    code, _, err = run(capsys, ["runs", "--delete", str(rid)])
    assert code == 2 and f"run {rid} is still being trained" in err
    runs = RunStore().list_runs()
    assert [r["id"] for r in runs] == [rid] and runs[0]["initial_loss"] == 3.5 and not math.isnan(3.5)


def test_depth_limit_is_generous_for_real_configs():
    from engine.limits import json_loads, yaml_load
    assert MAX_DEPTH >= 8
    assert json_loads('{"a": {"b": [1, {"c": 2}]}}', "x") == {"a": {"b": [1, {"c": 2}]}}
    assert yaml_load("a:\n  b:\n    - 1\n") == {"a": {"b": [1]}}
