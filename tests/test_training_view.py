"""app.training_view: the Training page's choices -> a run (or the message the page shows), stored-run rows."""
from app import training_view
from app.training_view import PlannedRun, plan_run
from engine.presets import PRESETS
from engine.train.loop import RunResult, TrainConfig

MICRO = PRESETS["microgpt"].config
SETTINGS = dict(steps=20, batch=4, seq=8, lr=3e-3, warmup=2, min_lr_ratio=0.1, weight_decay=0.1, grad_clip=1.0,
                z_loss=0.0, dropout=0.0, seed=3, eval_every=10)


def test_single_small_run_on_names():
    run = plan_run(MICRO, SETTINGS, "names", "small", "single run", None, "cpu")
    assert isinstance(run, PlannedRun) and list(run.configs) == ["microgpt-small"]
    assert run.configs["microgpt-small"].d_model == 64 and run.configs["microgpt-small"].n_layers == 2
    assert run.tc == TrainConfig(**SETTINGS, data="names")


def test_widget_floats_become_the_train_config_types():
    run = plan_run(MICRO, SETTINGS | {"steps": 20.0, "seed": 3.0, "lr": 1}, "names", "as configured", "single run",
                   None, "cpu")
    assert run.tc.steps == 20 and type(run.tc.steps) is int and type(run.tc.lr) is float
    assert list(run.configs) == ["microgpt"]


def test_ab_gives_two_configs():
    run = plan_run(MICRO, SETTINGS, "names", "small", "pre-norm vs post-norm", None, "cpu")
    assert {c.norm_placement for c in run.configs.values()} == {"pre", "post"}


def test_bad_settings_and_uploads_give_the_message_not_an_exception():
    assert plan_run(MICRO, SETTINGS | {"steps": 0}, "names", "small", "single run", None, "cpu") == \
        "steps: 0 is not an integer >= 1"
    assert plan_run(MICRO, SETTINGS, "upload", "small", "single run", None, "cpu") == \
        "Upload a text file to train on it."
    bad = plan_run(MICRO, SETTINGS, "upload", "small", "single run", ("x.txt", b"ok \xff more"), "cpu")
    assert bad == "data: x.txt is not UTF-8 text (byte 3 cannot be decoded); upload a plain-text file"
    short = plan_run(MICRO, SETTINGS, "upload", "small", "single run", ("x.txt", b"too short"), "cpu")
    assert short.startswith("data: x.txt cannot be used (data: the text has 9 characters")


def test_uploaded_text_is_character_level():
    text = "abcabc hello world\n" * 10
    run = plan_run(MICRO, SETTINGS, "upload", "small", "single run", ("t.txt", text.encode()), "cpu")
    assert run.data.vocab_size == len(set(text)) + 1    # + the BOS token


def test_a_model_that_does_not_fit_is_refused_before_building():
    huge = MICRO.replace(d_model=8192, n_layers=4096, n_heads=64)
    msg = plan_run(huge, SETTINGS, "names", "as configured", "single run", None, "cpu")
    assert isinstance(msg, str) and msg.startswith("refusing to build microgpt")


def test_stored_runs_rows_and_labels():
    runs = [{"id": 7, "name": "a", "data": "names", "status": "diverged", "steps": 3, "params": 1_234_567,
             "world": 1, "initial_loss": 3.25, "final_loss": None, "tokens_per_s": None},
            {"id": 6, "name": "b", "data": "stdlib", "status": "finished", "steps": 150, "params": 10, "world": 2,
             "initial_loss": 5.0, "final_loss": 1.23456, "tokens_per_s": 12_345.6}]
    rows = training_view.stored_runs_rows(runs)
    assert rows[0]["params"] == "1,234,567" and rows[0]["val loss (nats)"] == "3.250 → —"
    assert rows[0]["tokens/s (median step)"] == "0" and rows[1]["tokens/s (median step)"] == "12,346"
    assert rows[1]["val loss (nats)"] == "5.000 → 1.235" and rows[1]["processes"] == 2
    noisy = training_view.stored_runs_rows([runs[1] | {"tokens_per_s_spread": 0.26}])
    assert noisy[0]["tokens/s (median step)"] == "12,346 (noisy)"    # IQR over a quarter of the median, as Latency
    assert training_view.run_labels(runs) == {7: "7: a on names", 6: "6: b on stdlib"}   # no status: it changes
    assert training_view.samples_caption("run 7", ["ab\nc", "d"]) == "Samples from run 7: ab⏎c · d"


def test_speed_text_says_median_gives_the_ratio_and_names_the_noisy_run():
    def result(name, tokens_per_s, spread):
        return RunResult("finished", "", [], MICRO.replace(name=name), 1, tokens_per_s=tokens_per_s,
                         tokens_per_s_spread=spread)

    text = training_view.speed_text({"LayerNorm": result("a", 25_600.0, 0.1), "RMSNorm": result("b", 32_000.0, 0.4)})
    assert "the median over the training steps" in text and "RMSNorm / LayerNorm = 1.25x" in text
    assert "Noisy: RMSNorm (IQR 40% of the median)" in text and "LayerNorm (IQR" not in text
    assert "Noisy" not in training_view.speed_text({"a": result("a", 1.0, 0.25)})   # the bound itself is not noisy
