"""Links reproduce the view: every page's own settings go into the URL and a new session opened on that URL
shows the same settings and the same config. A bad value is a warning naming the key; the default applies."""
import pytest

from app import pins
from app.state import VIEW_PARAMS
from engine.config import FIELDS
from engine.presets import PRESETS

BUDGETS, LATENCY, COMPARE = "pages/budgets.py", "pages/latency.py", "pages/compare.py"
ACTIVATIONS, LECTURE, TRAINING = "pages/activations.py", "pages/lecture.py", "pages/training.py"
LLAMA4 = PRESETS["llama-3-8b"].config.replace(n_kv_heads=4)

PAGE_CHANGES = {   # page -> {(widget kind, key): a value other than the default}
    BUDGETS: {("number_input", "b_batch"): 8, ("number_input", "b_seq"): 512, ("selectbox", "b_opt"): "sgd",
              ("selectbox", "b_recompute"): "full", ("selectbox", "b_attn"): "explicit",
              ("selectbox", "b_dtype"): "fp32", ("toggle", "b_causal"): True, ("selectbox", "b_device"): "A100"},
    LATENCY: {("selectbox", "lat_dtype"): "bf16", ("selectbox", "lat_mode"): "train",
              ("multiselect", "lat_batches"): [2, 8], ("multiselect", "lat_seqs"): [64]},
    COMPARE: {("toggle", "cmp_log"): False, ("toggle", "cmp_only"): True},
    ACTIVATIONS: {("slider", "act_range"): (-2.0, 6.0), ("slider", "stats_tokens"): 32},
    LECTURE: {("toggle", "lecture_present"): True},
    TRAINING: {("selectbox", "t_data"): "stdlib", ("radio", "t_size"): "as configured",
               ("selectbox", "t_ab"): "dense vs SwiGLU", ("number_input", "t_steps"): 40,
               ("number_input", "t_batch"): 8, ("number_input", "t_seq"): 64, ("number_input", "t_lr"): 1.234567e-4,
               ("number_input", "t_warmup"): 5, ("number_input", "t_ratio"): 0.05, ("number_input", "t_wd"): 0.0,
               ("number_input", "t_clip"): 0.5, ("number_input", "t_zloss"): 1e-4, ("number_input", "t_dropout"): 0.2,
               ("number_input", "t_seed"): 7, ("number_input", "t_every"): 10},
}


def same(a, b) -> bool:
    return (list(a) if isinstance(a, (list, tuple)) else a) == (list(b) if isinstance(b, (list, tuple)) else b)


def reopen(new_app, page: str, url: dict):
    at = new_app(page=page, **url)
    at.run()
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    return at


def test_view_keys_are_not_config_fields():
    assert not set(VIEW_PARAMS) & set(FIELDS) and "preset" not in VIEW_PARAMS


@pytest.mark.parametrize("page", list(PAGE_CHANGES))
def test_page_settings_round_trip_through_the_url(new_app, page):
    at = new_app(page=page, preset="llama-3-8b", n_kv_heads="4")
    at.run()
    for (kind, key), value in PAGE_CHANGES[page].items():
        getattr(at, kind)(key=key).set_value(value).run()
        assert not at.exception, at.exception
    url = dict(at.query_params)
    assert url["preset"] == "llama-3-8b" and url["n_kv_heads"] == "4"
    again = reopen(new_app, page, url)
    for (kind, key), value in PAGE_CHANGES[page].items():
        assert same(getattr(again, kind)(key=key).value, value), key
    assert dict(again.query_params) == url
    assert again.session_state["cfg"] == LLAMA4


def test_compare_pins_round_trip_through_the_url(new_app):
    at = new_app(page=COMPARE, preset="llama-3-8b", n_kv_heads="4")
    at.run()
    at.selectbox(key="cmp_preset").set_value("mistral-7b").run()
    next(b for b in at.button if b.label == "Pin this preset").click().run()
    url = dict(at.query_params)
    want = [("llama-3-8b (current)", LLAMA4), ("gpt2", PRESETS["gpt2"].config),
            ("mistral-7b", PRESETS["mistral-7b"].config)]
    assert at.session_state["pins"] == want
    assert url["pins"].endswith(",gpt2,mistral-7b")   # plain presets stay readable
    assert reopen(new_app, COMPARE, url).session_state["pins"] == want


def test_pin_codec_keeps_labels_and_edited_configs():
    edited = PRESETS["gemma-2-2b"].config.replace(n_layers=3, name="my, model & co")
    kept = [("a label, with commas", edited), ("qwen3-0.6b", PRESETS["qwen3-0.6b"].config),
            ("gpt2 (renamed)", PRESETS["gpt2"].config)]
    assert pins.decode_pins(pins.encode_pins(kept)) == (kept, [])


def test_bad_pin_is_reported_and_left_out():
    got, problems = pins.decode_pins("gpt2,llama3-8b,preset=gpt2&n_layers=0")
    assert got == [("gpt2", PRESETS["gpt2"].config)]
    assert problems[0].startswith("pins: 'llama3-8b' is not a preset") and "n_layers: 0" in problems[1]


@pytest.mark.parametrize("page,param,bad,allowed", [
    (BUDGETS, "batch", "0", "is not an integer from 1 to 4,096"),
    (BUDGETS, "optimizer", "lion", "is not one of adamw, sgd-momentum, sgd"),
    (LATENCY, "seqs", "32,33", "'33' is not one of"),
    (ACTIVATIONS, "range", "5,1", "with low < high"),
    (ACTIVATIONS, "curves", "relu,tanh", "'tanh' is not one of relu"),
    (TRAINING, "train_steps", "0", "is not an integer from 1 to 100,000"),
    (TRAINING, "train_lr", "fast", "'fast' is not a number from 1e-06 to 10000"),
    (TRAINING, "train_dropout", "0.95", "0.95 is not a number from 0 to 0.9"),
    (TRAINING, "train_data", "wiki", "'wiki' is not one of names, stdlib, upload"),
])
def test_bad_view_value_is_a_warning_and_the_default_applies(new_app, page, param, bad, allowed):
    at = new_app(page=page, **{param: bad})
    at.run()
    assert not at.exception
    assert any(w.value.startswith(f"URL: {param}: ") and allowed in w.value.replace("\\", "") for w in at.warning)
    # the bad value is gone: the key is left out at its default, or (batches, seqs: machine-dependent defaults,
    # always written) carries the default the page fell back to
    assert at.query_params.get(param) != bad


def test_bad_settings_in_a_collapsed_expander_warn_at_the_top_and_say_the_url_was_cleaned(new_app):
    """The Training page's run settings sit in a collapsed expander: their link problems used to be drawn inside
    it, unseen, while the URL was cleaned silently."""
    at = new_app(page=TRAINING, train_steps="abc", train_lr="-1")
    at.run()
    assert not at.exception
    said = [w.value.replace("\\", "") for w in at.warning]
    assert any("train_steps: 'abc' is not an integer from 1 to 100,000" in w and "removed from the URL" in w
               and "the default (150) applies" in w for w in said), said
    assert any("train_lr: -1 is not a number from 1e-06 to 10000" in w and "removed from the URL" in w
               for w in said), said
    assert all(not e.warning for e in at.expander)      # none of them hidden in the settings expander
    assert "train_steps" not in at.query_params and "train_lr" not in at.query_params


def test_default_settings_keep_the_link_short(new_app):
    at = new_app(page=BUDGETS)
    at.run()
    assert dict(at.query_params) == {"preset": "gpt2"}


def test_training_settings_use_their_own_keys_and_defaults_stay_out(new_app):
    """Budgets' `batch`/`seq` kept in a link do not leak into the Training page's batch and sequence boxes."""
    at = new_app(page=TRAINING, batch="8", seq="512")
    at.run()
    assert not at.exception and not at.warning
    assert at.number_input(key="t_batch").value == 32 and at.number_input(key="t_seq").value == 16
    assert not any(k.startswith("train_") for k in at.query_params)
