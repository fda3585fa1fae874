"""A teacher's limits on heavy jobs (app.policy, app.heavy) and what a session sees: the options parse with
messages naming the variable, the server settings match the engine's limits, a job waits for a busy queue with
its place shown and leaves it on Stop, and switched-off heavy jobs say so."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from app import heavy
from app.policy import OPTIONS, PolicyError, default_jobs, policy
from app.serve import parser, streamlit_command
from engine.limits import MAX_DATA_BYTES

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_half_the_cores_at_least_one():
    assert [default_jobs(n) for n in (1, 2, 3, 8)] == [1, 1, 1, 4]
    p = policy({})
    assert (p.jobs, p.heavy, p.max_steps, p.max_params) == (default_jobs(), True, None, None)


def test_options_parse_and_bad_values_name_the_variable():
    p = policy({"EXPLORER_JOBS": "3", "EXPLORER_QUEUE": "0", "EXPLORER_HEAVY": "off", "EXPLORER_MAX_STEPS": "200",
                "EXPLORER_MAX_PARAMS": "5_000_000"})
    assert (p.jobs, p.queue, p.heavy, p.max_steps, p.max_params) == (3, 0, False, 200, 5_000_000)
    with pytest.raises(PolicyError) as e:
        policy({"EXPLORER_JOBS": "two", "EXPLORER_HEAVY": "maybe"})
    assert "EXPLORER_JOBS (--jobs): 'two' is not a whole number" in str(e.value)
    assert "EXPLORER_HEAVY (--heavy): 'maybe' is not on or off" in str(e.value)


def test_every_option_is_a_serve_flag():
    help_text = parser().format_help()
    for opt in OPTIONS:
        assert opt.flag in help_text and opt.env in help_text


def test_served_settings_headless_no_watcher_and_the_engines_upload_bound():
    cmd = " ".join(streamlit_command(ROOT / "streamlit_app.py", "0.0.0.0", 8501))
    for setting in ("--server.headless true", "--server.fileWatcherType none", "--server.address 0.0.0.0",
                    "--server.port 8501", "--browser.gatherUsageStats false"):
        assert setting in cmd
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] * 2**20 == MAX_DATA_BYTES   # MiB; the training-text limit
    assert config["server"]["fileWatcherType"] == "none"


def test_refusals_name_the_limit(monkeypatch):
    monkeypatch.setenv("EXPLORER_MAX_PARAMS", "1000")
    monkeypatch.setenv("EXPLORER_MAX_STEPS", "10")
    assert "at most 1,000" in heavy.refusal(params=5000) and "EXPLORER_MAX_PARAMS" in heavy.refusal(params=5000)
    assert "more than this server allows for one run (10, EXPLORER_MAX_STEPS)" in heavy.refusal(steps=11)
    assert heavy.refusal(params=1000, steps=10) is None
    monkeypatch.setenv("EXPLORER_HEAVY", "off")
    assert "turned off on this server" in heavy.refusal()


@pytest.fixture
def one_slot(monkeypatch):
    """A server queue of one slot, empty, for this test."""
    monkeypatch.setenv("EXPLORER_JOBS", "1")
    heavy.job_queue.clear()
    yield heavy.job_queue()
    heavy.job_queue.clear()


def _texts(at) -> list[str]:
    return [e.value for e in (*at.info, *at.warning, *at.error, *at.caption)]


def test_a_training_run_waits_for_a_busy_queue_and_stop_leaves_it(new_app, one_slot):
    blocker = one_slot.enter("another session's run", 30.0)
    at = new_app("pages/training.py", timeout=120, train_steps="2")
    at.run()
    at.button(key="t_start").click().run()
    waiting = [t for t in _texts(at) if "Waiting for a free slot" in t]
    assert waiting and "place **1** of 1" in waiting[0], _texts(at)
    assert 0 < int(re.search(r"about \*\*(\d+) s\*\*", waiting[0]).group(1)) <= 30   # the blocker's 30 s, less time gone
    job = at.session_state["train_job"]
    assert job.waiting and one_slot.running == 1
    at.button(key="t_stop").click().run()
    job.join(30)
    assert job.cancelled and not job.results and one_slot.waiting == 0
    blocker.leave()
    assert one_slot.counts == {"running": 1, "done": 1, "cancelled": 1}


def test_heavy_jobs_off_disables_start_and_says_why(new_app, monkeypatch):
    monkeypatch.setenv("EXPLORER_HEAVY", "off")
    at = new_app("pages/training.py", timeout=120)
    at.run()
    assert at.button(key="t_start").disabled
    assert any(re.search(r"turned off on this server \(EXPLORER_HEAVY=off\)", t) for t in _texts(at))


def test_the_readme_lists_every_option_with_its_flag():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Hosting a class", 1)[1].split("**Memory.**", 1)[0]
    rows = re.findall(r"^\| `(EXPLORER_\w+)` \| `(--[\w-]+)` \|", table, re.M)
    assert rows == [(opt.env, opt.flag) for opt in OPTIONS]
