"""Shared fixtures for the app tests.

`new_app`: an AppTest of streamlit_app.py, every group of the sidebar editor open (editor_open=False: as a new
session sees it, only Sizes). AppTest re-detects a `pages/` folder next to the main script on every
run and then runs the page file alone (MPA v1), losing the sidebar; so the test entry is a one-line wrapper in a
temporary folder that runs streamlit_app.py (whose st.Page paths are absolute).
`served_app`: `streamlit run streamlit_app.py` on a free port for the session (base URL).
`browser`: Playwright driving Debian's /usr/bin/chromium (never `playwright install`); skips with the reason
when Chromium or Playwright is missing, fails instead when REQUIRE_BROWSER=1.
Under pytest-xdist (`make test` runs `-n auto --dist worksteal`) each worker that meets a browser test starts its
own server and Chromium (session fixtures are per worker process). No xdist group: `--dist loadgroup` stopped
grouping with pytest 9.2 (pytest-dev/pytest-xdist#1386: the group rides on a node id pytest no longer reads), and
work stealing evens out the long browser and subprocess tests better than one worker holding them all.
"""
from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.serve import wait_for_health
from tests.helpers import APP_WAIT_S, BROWSER_WAIT_MS
from tests.torchrun_runs import free_port

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "streamlit_app.py"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


# Files outside the engine's inner loop: the app (AppTest, the browser), timing, and files that start processes
# (the CLI, torchrun, the class server, a container). Every other test is marked `engine` unless it drives the
# app itself (the APP_FIXTURES) or is marked `process` (it starts a Python process), or `view`: the unit tests of
# the app's pure view helpers (charts, diagram, tables; no streamlit). `make test-fast` selects `-m engine`; the
# mutation runs select `-m "engine or view"` (a diagram test that reads an engine label kills its mutants too).
# A new engine test file joins them without a config change.
NOT_ENGINE = ("test_app_*", "test_browser*", "test_hostile_app.py", "test_hostile_cli.py", "test_cli_*",
              "test_interop_cli.py", "test_train_cli.py", "test_readme_commands.py", "test_ddp.py", "test_sharding.py",
              "test_imports.py", "test_assertions.py", "test_lora_peft.py", "test_sweep_measured.py",
              "test_latency*.py", "test_measure_peak.py", "test_peak_probe.py", "test_guard_peak.py", "test_export.py",
              "test_classroom.py", "test_dockerfile.py")
VIEW = ("test_compare_view.py", "test_training_view.py", "test_charts.py", "test_lecture_charts.py",
        "test_sweep_charts.py", "test_diagram.py", "test_plain_text.py")
APP_FIXTURES = {"new_app", "served_app", "browser"}


def _matches(name: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(name, g) for g in globs)


def pytest_ignore_collect(collection_path, config):
    """`-m engine...` (make test-fast's "engine and not slow") and `-m "engine or view"` (the mutation runs): the
    other files are not even imported (their imports of streamlit, peft and the browser's helpers cost seconds
    per worker)."""
    expr = " ".join(config.option.markexpr.split())
    if not collection_path.is_file():
        return None
    name = collection_path.name
    if expr == "engine or view":
        return True if _matches(name, NOT_ENGINE) else None
    if expr == "engine" or expr.startswith("engine and "):
        return True if _matches(name, NOT_ENGINE + VIEW) else None
    return None


def pytest_configure(config):
    """Under pytest-xdist each worker gets its share of the cores for torch's intra-op threads: two workers of
    two threads each on two cores wait for a descheduled partner at every parallel region (engine/measure/rounds.py
    cpu_threads says the same of timing): `make test-fast` took 325 CPU-s that way and 184 with one thread each."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _matches(item.path.name, NOT_ENGINE) or APP_FIXTURES & set(item.fixturenames) \
                or item.get_closest_marker("process"):
            continue
        item.add_marker(pytest.mark.view if _matches(item.path.name, VIEW) else pytest.mark.engine)


@pytest.fixture(autouse=True)
def _private_explorer_home(tmp_path_factory, monkeypatch):
    """No test reads or writes the user's stored runs (~/.explorer)."""
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path_factory.mktemp("explorer_home")))


PINNED_PEAKS = {"peak": {"fp32": 5e11, "bf16": 1e12, "fp16": 1e12}, "bandwidth": 5e10}


@pytest.fixture(autouse=True)
def _pinned_peaks(monkeypatch):
    """MFU readings and duration estimates use fixed CPU peaks above what this CPU reaches, not a probe that
    takes seconds and moves with the load; the probe's own tests (tests/test_peak_probe.py) clear this."""
    import torch

    from engine.measure import probe
    keys = [probe.machine_key(torch.device("cpu"), n) for n in range(1, torch.get_num_threads() + 1)]
    monkeypatch.setattr(probe, "_CACHE", {k: {"peak": dict(PINNED_PEAKS["peak"]),
                                              "bandwidth": PINNED_PEAKS["bandwidth"]} for k in keys})


@pytest.fixture(scope="session")
def one_process_run(tmp_path_factory) -> dict:
    """The stored one-process run of tests/torchrun_runs.py TRAIN_ARGS: the curve DDP, FSDP2 and TP are held against
    (run once per worker, not once per parallel mode)."""
    import sys

    from tests.torchrun_runs import TRAIN_ARGS, stored_train_run
    return stored_train_run([sys.executable, *TRAIN_ARGS], tmp_path_factory.mktemp("one_process"))


def _entry(app_path: str) -> None:
    import runpy
    runpy.run_path(app_path, run_name="__main__")


@pytest.fixture
def new_app():
    """Factory: new_app(page=None, **query_params) -> AppTest (not yet run) of the whole app."""
    from streamlit.testing.v1 import AppTest

    from app.editor import group_key
    from engine.config import GROUPS

    def make(page: str | None = None, timeout: float = APP_WAIT_S, editor_open: bool = True, **query: str) -> AppTest:
        at = AppTest.from_function(_entry, args=(str(APP),), default_timeout=timeout)
        for key, value in query.items():
            at.query_params[key] = value
        for group in GROUPS if editor_open else ():   # the sidebar draws only open groups' widgets
            at.session_state[group_key(group)] = True
        if page is not None:
            at.run()
            at.switch_page(str(ROOT / page))
        return at

    return make


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def served_app(tmp_path_factory):
    """Start `streamlit run streamlit_app.py` headless on a free port, with its own EXPLORER_HOME so browser
    tests never touch the user's stored runs; yield its base URL; stop it."""
    port = free_port()
    env = {**os.environ, "EXPLORER_HOME": str(tmp_path_factory.mktemp("explorer_home"))}
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true",
           "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    log = open(ROOT / ".pytest_cache" / f"served_app-{worker}.log" if (ROOT / ".pytest_cache").is_dir()
               else os.devnull, "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_for_health(url, proc, APP_WAIT_S)
        except RuntimeError as e:
            pytest.fail(str(e))
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


class _Browser:
    """The Playwright browser; every page and context it opens waits up to BROWSER_WAIT_MS by default, so a test
    states what it waits for and never how long."""

    def __init__(self, browser):
        self._browser = browser

    def new_page(self, **kwargs):
        page = self._browser.new_page(**kwargs)
        page.set_default_timeout(BROWSER_WAIT_MS)
        page.set_default_navigation_timeout(BROWSER_WAIT_MS)
        return page

    def new_context(self, **kwargs):
        context = self._browser.new_context(**kwargs)
        context.set_default_timeout(BROWSER_WAIT_MS)
        context.set_default_navigation_timeout(BROWSER_WAIT_MS)
        return context

    def __getattr__(self, name):
        return getattr(self._browser, name)


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium via Playwright's sync API."""
    if not os.access(CHROMIUM, os.X_OK):
        _skip_or_fail(f"no Chromium at {CHROMIUM} (install Debian's `chromium`; `make test` does when root)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _skip_or_fail("playwright is not installed (pip install -r requirements-dev.txt)")
    expect.set_options(timeout=BROWSER_WAIT_MS)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield _Browser(b)
        b.close()
