"""Training page (AppTest, short runs in the background thread): single run, A/B, stop, stored runs, errors;
and its figure builders."""
from __future__ import annotations

import re

import pytest

from app import charts
from app.charts import training as training_charts
from engine.train.loop import StepRecord
from engine.train.store import RunStore
from tests.browser_pages import quiet


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_HOME", str(tmp_path))


def steps(n: int, val_every: int = 2) -> list[StepRecord]:
    return [StepRecord(s, 3.0 - 0.1 * s, 1e-3, 1.0, 1e4, 2.0, 3.0 + s, val_loss=3.1 - 0.1 * s if s % val_every == 0
                       else None) for s in range(1, n + 1)]


def test_loss_and_diagnostic_figures():
    fig = training_charts.loss_figure({"A": steps(4), "B": [vars(r) for r in steps(2)]})
    assert [t.name for t in fig.data] == ["A train", "A val", "B train", "B val"]
    assert list(fig.data[1].x) == [2, 4] and fig.data[0].line.color != fig.data[2].line.color
    assert "nats" in fig.layout.yaxis.title.text and fig.layout.xaxis.title.text == "optimizer step"
    diag = training_charts.diagnostics_figure({"A": steps(3)})
    assert len(diag.data) == 4 and list(diag.data[3].y) == [4.0, 5.0, 6.0]
    speed = training_charts.speed_figure({"A": 100.0, "B": 50_000.0}, {"B": True})
    assert list(speed.data[0].y) == [100.0, 50_000.0] and "median step (tokens/s)" in speed.layout.yaxis.title.text
    assert list(speed.data[0].text) == ["100 tokens/s", "50,000 tokens/s (noisy)"]


def test_a_one_step_curve_is_visible_and_ab_colours_differ():
    fig = training_charts.loss_figure({"diverged": steps(1), "B": steps(3)})
    assert fig.data[0].mode == "markers" and fig.data[2].mode == "lines"   # one point: a line would draw nothing
    assert training_charts.diagnostics_figure({"diverged": steps(1)}).data[0].mode == "markers"
    assert charts.SERIES_COLORS[0] != charts.SERIES_COLORS[1]
    assert len(set(charts.SERIES_COLORS)) == len(charts.SERIES_COLORS)


def finish(at):
    job = at.session_state["train_job"]
    job.join(120)
    assert not job.running
    at.run()
    return job


def set_settings(at, **values):
    for key, value in values.items():
        at.number_input(key=key).set_value(value)


def test_single_run_trains_in_the_background_and_is_stored(new_app):
    at = new_app("pages/training.py", preset="microgpt")
    at.run()
    assert not at.exception and at.title[0].value == "Training: microgpt"
    set_settings(at, t_steps=20, t_every=10)
    at.button(key="t_start").click().run()
    assert not at.exception and not at.error
    job = finish(at)
    assert not at.exception and list(job.results) == ["microgpt-small"]
    r = job.results["microgpt-small"]
    assert r.status == "finished" and any(f"run {r.run_id}" in s.value for s in at.success)
    assert [x["id"] for x in RunStore().list_runs()] == [r.run_id]
    table = at.dataframe[-1].value
    assert table["status"].tolist() == ["finished"]
    assert table["val loss (nats)"].tolist() == [f"{r.initial_loss:.3f} → {r.final_loss:.3f}"]
    assert any("20 of 20 optimizer steps" in p.text for p in at.get("progress"))
    assert at.multiselect(key="t_chosen").value == [r.run_id]
    at.button(key="t_delete").click().run()
    assert not at.exception and RunStore().list_runs() == []


def test_ab_runs_two_configs_on_the_same_seed(new_app):
    at = new_app("pages/training.py", preset="microgpt")
    at.run()
    set_settings(at, t_steps=8, t_every=4)
    at.selectbox(key="t_ab").set_value("dense vs SwiGLU")
    at.button(key="t_start").click().run()
    job = finish(at)
    assert not at.exception and list(job.results) == ["dense GELU", "SwiGLU (matched params)"]
    assert all(r.status == "finished" for r in job.results.values())
    assert len(RunStore().list_runs()) == 2
    assert at.multiselect(key="t_chosen").value == [r.run_id for r in job.results.values()]   # both overlaid
    (a, ra), (b, rb) = job.results.items()
    said = " ".join(c.value for c in at.caption)
    assert "the median over the training steps" in said
    assert f"{b} / {a} = {rb.tokens_per_s / ra.tokens_per_s:.2f}x" in said


def test_absurd_lr_shows_diverged_and_bad_settings_an_error(new_app):
    at = new_app("pages/training.py", preset="microgpt")
    at.run()
    set_settings(at, t_steps=20, t_lr=1e4, t_warmup=0)
    at.button(key="t_start").click().run()
    job = finish(at)
    assert job.results["microgpt-small"].status == "diverged"
    assert any("diverged at step" in e.value for e in at.error)
    initial = job.results["microgpt-small"].initial_loss
    assert at.dataframe[-1].value["val loss (nats)"].tolist() == [f"{initial:.3f} → —"]   # diverged: no final
    at.selectbox(key="t_data").set_value("upload").run()
    at.button(key="t_start").click().run()
    assert any("Upload a text file" in e.value for e in at.error)


def test_stop_button_ends_a_long_run(new_app):
    at = new_app("pages/training.py", preset="microgpt")
    at.run()
    set_settings(at, t_steps=100_000)
    at.button(key="t_start").click().run()
    at.button(key="t_stop").click().run()
    job = finish(at)
    assert job.results["microgpt-small"].status == "stopped" and any("stopped" in w.value for w in at.warning)


@pytest.mark.browser
@pytest.mark.slow
def test_browser_live_run_polls_to_the_end(served_app, browser):
    """The fragment polls the background thread: curves appear while training and the result when it ends.
    The served app writes to its own run store, so the test deletes its run through the page."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{served_app}/training?preset=microgpt")
    page.get_by_text("Optimizer and run settings").click()
    steps = page.get_by_label("Steps", exact=True)
    steps.fill("30")
    steps.press("Enter")
    quiet(page)
    page.get_by_role("button", name="Start training").click()
    page.wait_for_selector(".js-plotly-plot")
    page.get_by_text("30 steps: val loss").first.wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
    delete = page.get_by_role("button", name=re.compile(r"^Delete run \d+$"))
    name = delete.inner_text()
    delete.click()
    page.get_by_role("button", name=name, exact=True).wait_for(state="detached")
    page.close()
