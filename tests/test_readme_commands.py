"""Every `python -m engine` command shown in README.md runs, at small sizes.

The commands are read from the README's "Command line" block, each run twice: as written without its optional
[...] flags, and with all of them (the first of `a|b|c` alternatives). Small sizes: the model is shrunk with
field flags appended after the README's own (argparse keeps the last), --seq capped, training and timing cut
short. The error example under the block must print exactly the lines the README shows, and exit 2.
"""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from engine.cli import main
from engine.interop.hf_export import to_hf_config
from engine.presets import PRESETS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
SMALL_MODEL = ["--n-layers", "1", "--d-model", "64", "--n-heads", "4", "--n-kv-heads", "2", "--d-ff", "128",
               "--vocab-size", "256"]
SMALL_RUN = {"bench": ["--time-budget", "0.05"], "train": ["--steps", "2", "--samples", "0"],
             "sweep": ["--steps", "2", "--context", "64"]}
# Left out of the "all options" run: sweep's --measure times and trains every grid point (40 here); the sweep
# tests measure it at their own sizes.
SKIP_OPTION = {"sweep": "--measure"}
MAX_SEQ = 64
TAKES_CONFIG = {"params", "export", "memory", "flops", "bench", "train", "sweep"}


def block_after(heading: str) -> str:
    section = README.split(heading, 1)[1]
    return section.split("```bash\n", 1)[1].split("```", 1)[0]


def readme_commands() -> list[str]:
    text = block_after("## Command line").replace("\\\n", " ")
    return [line.split(" #", 1)[0].strip() for line in text.splitlines() if line.startswith("python -m engine")]


def variants(line: str) -> list[tuple[str, list[str]]]:
    bare = re.sub(r"\s*\[[^]]*\]", "", line)
    full = re.sub(r"\[([^]|]*)(\|[^]]*)?\]", r"\1", line)
    return [("bare", shlex.split(bare)), ("all options", shlex.split(full))]


def small(argv: list[str], tmp: Path) -> tuple[list[str], Path | None]:
    """argv of `python -m engine ...` at small sizes, with file names moved to `tmp`; and a > redirect target."""
    argv, out = argv[3:], None
    if ">" in argv:
        i = argv.index(">")
        argv, out = argv[:i], tmp / argv[i + 1]
    argv = [str(tmp / a) if a.endswith((".yaml", "folder")) else a for a in argv]
    if (skip := SKIP_OPTION.get(argv[0])) in argv:
        i = argv.index(skip)
        argv = argv[:i] + argv[i + 2:]
    argv = [str(min(int(a), MAX_SEQ)) if i and argv[i - 1] == "--seq" else a for i, a in enumerate(argv)]
    if argv[0] in TAKES_CONFIG:
        argv += SMALL_MODEL
    return argv + SMALL_RUN.get(argv[0], []), out


@pytest.fixture
def workdir(tmp_path):
    """A local Hugging Face folder (config.json of a tiny Llama) where the README says path/to/folder."""
    folder = tmp_path / "path" / "to" / "folder"
    folder.mkdir(parents=True)
    tiny = PRESETS["llama-3-8b"].config.replace(n_layers=1, d_model=64, n_heads=4, n_kv_heads=2, d_ff=128,
                                                 vocab_size=256, context_length=128)
    family, kwargs = to_hf_config(tiny)
    (folder / "config.json").write_text(json.dumps({"model_type": family, **kwargs}))
    return tmp_path


def test_the_readme_shows_the_commands_we_run():
    names = [shlex.split(c)[3] for c in readme_commands()]
    assert names == ["presets", "params", "export", "params", "memory", "flops", "bench", "train", "runs",
                     "import-hf", "plan", "sweep"]


@pytest.mark.parametrize("line", readme_commands())
def test_readme_command_runs(line, workdir, capsys, monkeypatch):
    monkeypatch.chdir(workdir)
    if "--config mistral.yaml" in line:   # the README writes it one line above
        main(["export", "--preset", "mistral-7b"])
        (workdir / "mistral.yaml").write_text(capsys.readouterr().out)
    for label, argv in variants(line):
        args, redirect = small(argv, workdir)
        rc = main(args)
        out, err = capsys.readouterr()
        assert rc == 0, (label, args, err)
        assert out.strip() and "Traceback" not in err, (label, args)
        if redirect is not None:
            redirect.write_text(out)
        if "--json" in args:
            json.loads(out)


def test_readme_error_example_prints_what_it_shows(capsys):
    example = README.split("never a traceback:\n\n```\n", 1)[1].split("```", 1)[0].splitlines()
    command, shown = example[0].removeprefix("$ "), example[1:]
    assert main(shlex.split(command)[3:]) == 2
    assert capsys.readouterr().err.splitlines() == shown
