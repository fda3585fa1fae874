"""The Dockerfile hosts what `make serve` runs, from the same requirements file: checked by reading it here, and
built (and its server asked for its health) only where a container engine answers."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.serve import wait_for_health

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", joined, re.M)]


def test_it_installs_the_runtime_requirements_and_runs_what_make_serve_runs():
    steps = instructions(DOCKERFILE)
    kinds = [k for k, _ in steps]
    base = dict(steps)["FROM"]
    assert base.startswith(f"python:{sys.version_info.major}.{sys.version_info.minor}")   # the Python the app targets
    assert ("COPY", "requirements.txt .") in steps
    install = [a for k, a in steps if k == "RUN" and "pip install" in a]
    assert install == ["pip install --no-cache-dir -r requirements.txt"]     # the same file, nothing added by hand
    assert "requirements-dev.txt" not in DOCKERFILE                           # tests and parity tools stay out
    assert kinds.index("RUN", kinds.index("COPY")) < [i for i, k in enumerate(kinds) if k == "COPY"][-1]  # deps cached
    serve = re.search(r"^serve:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "-m app.serve" in serve
    assert dict(steps)["CMD"] == '["python", "-m", "app.serve"]'
    env = dict(re.findall(r"(\w+)=(\S+)", dict(steps)["ENV"]))
    assert dict(steps)["EXPOSE"] == env["PORT"] == "7860"   # a Space's default app_port
    assert env["ADDRESS"] == "0.0.0.0" and dict(steps)["USER"] == "explorer" and "--uid 1000" in DOCKERFILE


def test_the_build_context_leaves_the_virtual_environments_out():
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".venv-runtime", ".git"} <= set(ignored)


def _engine() -> str | None:
    for tool in ("docker", "podman"):
        exe = shutil.which(tool)
        if exe and subprocess.run([exe, "info"], capture_output=True, timeout=60).returncode == 0:
            return exe
    return None


def test_the_image_builds_and_answers_where_a_container_engine_runs():
    exe = _engine()
    if exe is None:
        pytest.skip("no container engine answers here (docker/podman info fails); the Dockerfile was checked above")
    tag = "explorer-classroom-test"
    subprocess.run([exe, "build", "-t", tag, str(ROOT)], check=True, timeout=3600)
    run = subprocess.run([exe, "run", "-d", "--rm", "-p", "127.0.0.1::7860", tag], check=True, capture_output=True,
                         text=True, timeout=120)
    container = run.stdout.strip()
    try:
        port = subprocess.run([exe, "port", container, "7860"], check=True, capture_output=True, text=True,
                              timeout=60).stdout.split(":")[-1].strip()
        assert wait_for_health(f"http://127.0.0.1:{port}", None) == b"ok"
    finally:
        subprocess.run([exe, "stop", container], capture_output=True, timeout=120)
