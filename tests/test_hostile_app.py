"""Hostile input to the app (AppTest): crafted URLs, uploads and run stores give an error or warning element that
names the field or file, never an exception element; a crafted name stays plain text."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.config import ModelConfig
from engine.limits import MAX_INT
from engine.train.loop import TrainConfig
from engine.train.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"(?<!\\)\]\(")   # `](` not escaped: Markdown would make a link or an image
CRAFTED = "[x](http://evil.example/phish) ![i](http://evil.example/t.png) :red[hi] $x$ <b>b</b>"


def alerts(at) -> list[str]:
    return [e.value for e in (*at.error, *at.warning, *at.sidebar.error, *at.sidebar.warning)]


def assert_clean(at, named: str) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert any(named in a for a in alerts(at)), (named, alerts(at))


@pytest.mark.parametrize("query,named", [
    ({"d_model": str(MAX_INT + 1)}, "d_model:"),
    ({"n_layers": "1e15"}, "n_layers:"),
    ({"d_model": "1e3000"}, "d_model:"),
    ({"n_heads": "1e400"}, "n_heads:"),
    ({"dropout": "nan"}, "dropout:"),
    ({"d_model": "[x](http://evil.example)"}, "d_model:"),
])
def test_hostile_url_values(new_app, query, named):
    at = new_app(**query)
    at.run()
    assert_clean(at, named)
    assert not any(LINK.search(a) for a in alerts(at))   # the quoted value is escaped, not a link


def test_crafted_name_is_plain_text_in_the_heading(new_app):
    at = new_app(name=CRAFTED)
    at.run()
    assert not at.exception
    title = at.title[0].value
    assert not LINK.search(title) and "\\[x\\]" in title and "\\!\\[i\\]" in title and "\\$x\\$" in title
    assert "<b>" not in title and "\\<b\\>" in title


def test_activations_refuses_many_tiny_heads_before_building(new_app):
    """The issue's case: 700,000 heads of width 1 pass the parameter limit; the explicit path's T x T maps don't."""
    at = new_app(page="pages/activations.py", d_model="64", n_heads="700000", head_dim="1", n_layers="1",
                 vocab_size="1000")
    at.run()
    assert not at.exception
    assert any("refusing to build" in e.value and "inference pass" in e.value for e in at.error), alerts(at)
    assert not [b for b in at.button if b.label == "Build and measure"]


def test_budgets_measure_at_the_largest_width_is_refused(new_app):
    at = new_app(page="pages/budgets.py", d_model=str(MAX_INT), n_heads="1")
    at.run()
    next(b for b in at.button if b.key == "b_measure").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("more than torch can address" in a or "Not building" in a for a in alerts(at)), alerts(at)


@pytest.mark.parametrize("name,data,named", [
    ("deep.yaml", ("name: " + "[" * 1200 + "]" * 1200 + "\n").encode(), "nested"),
    ("dup.yaml", b"d_model: 64\nd_model: 128\n", "duplicate key `d_model`"),
    ("digits.yaml", f"d_model: {'9' * 5000}\n".encode(), "digit integer"),
    ("layers.yaml", b"n_layers: 1000000000\n", "n_layers:"),
])
def test_hostile_uploads(new_app, name, data, named):
    at = new_app()
    at.run()
    up = next(u for u in at.get("file_uploader") if "yaml_upload" in u.key)
    up.set_value((name, data, "application/x-yaml")).run()
    assert_clean(at, named)


@pytest.mark.parametrize("spoil,named", [
    (lambda p: p.write_bytes(b""), "is empty (0 bytes)"),
    (lambda p: p.write_bytes(b"garbage" * 500), "not a readable SQLite database"),
])
def test_unusable_store_on_the_training_page(new_app, tmp_path, monkeypatch, spoil, named):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))
    path = tmp_path / "runs.sqlite"
    spoil(path)
    before = path.read_bytes()
    at = new_app(page="pages/training.py")
    at.run()
    assert_clean(at, named)
    assert any(str(path) in e.value for e in at.error) and path.read_bytes() == before   # named, untouched
    at.switch_page(str(ROOT / "pages/design.py")).run()
    assert not at.exception and not [e for e in at.error if "runs.sqlite" in e.value]   # other pages unaffected
    at.switch_page(str(ROOT / "pages/training.py")).run()
    next(b for b in at.button if b.key == "t_move_aside").click().run()
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("runs.sqlite.unusable-")]
    assert len(moved) == 1 and moved[0].read_bytes() == before and not at.exception


def test_a_running_run_cannot_be_deleted_from_the_page(new_app, tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))
    rid = RunStore().create_run(ModelConfig(name="other session"), TrainConfig(), "names", 1, "cpu")   # alive
    at = new_app(page="pages/training.py")
    at.run()
    assert not at.exception
    delete = next(b for b in at.button if b.key == "t_delete")
    assert delete.label == f"Delete run {rid}" and delete.disabled
    assert [r["id"] for r in RunStore().list_runs()] == [rid]


@pytest.mark.parametrize("settings,upload,named", [
    ({"seq": 100_000}, None, "seq:"), ({"lr": float("inf")}, None, "lr:"), ({"seed": -1}, None, "seed:"),
    ({"weight_decay": float("nan")}, None, "weight_decay:"), ({"batch": 10**9}, None, "batch="),
    ({}, ("big.txt", b"a" * (64 * 1024 * 1024 + 1)), "the limit is"), ({}, ("bin.txt", bytes(range(256))), "UTF-8"),
    ({}, ("short.txt", b"the quick brown fox " * 8), "seq:"), ({}, ("tiny.txt", b"abc"), "data:"),
])
def test_training_settings_and_uploads_are_refused_by_name(settings, upload, named):
    """The Training page's plan (app.training_view.plan_run) refuses before anything is built."""
    from app.training_view import plan_run
    base = {"steps": 5, "batch": 32, "seq": 16, "lr": 3e-3, "seed": 0}
    source = "upload" if upload else "names"
    plan = plan_run(ModelConfig().replace(n_layers=1, d_model=32, n_heads=2), {**base, **settings}, source,
                    "small", "single run", upload, "cpu")
    assert isinstance(plan, str) and named in plan, plan
