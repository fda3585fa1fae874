"""Bad input never crashes the app: every sidebar field, every page, the URL and the YAML upload.

Each check asserts no exception element, a message that names the field, and that the metric row keeps showing
the last valid config. One AppTest session walks many values (Reset to preset between fields) to stay fast.
"""
import pytest

from app import state
from engine.budget.params import count_params
from engine.config import FIELDS
from engine.presets import PRESETS

BASE = "gemma-2-2b"   # rope, a window with global layers, soft-caps: no walked field is disabled by a coupling
BASE_TOTAL = f"{PRESETS[BASE].reference_params:,}"
PAGES = ["design", "budgets", "activations", "latency", "training", "compare", "tradeoffs", "deploy", "lecture"]
MIN_SAFE, MAX_SAFE = -(2**53 - 1), 2**53 - 1   # a browser number box's bounds (JS safe integers)


def total(at) -> str:
    return {m.label: m.value for m in at.metric}["Total parameters"]


def field_errors(at, name: str) -> list[str]:
    return [e.value for e in at.sidebar.error if e.value.startswith(f"{name}:")]


def messages(at) -> str:
    return "\n".join(m.value for m in (*at.warning, *at.error))


def reset(at) -> None:
    next(b for b in at.sidebar.button if b.label == "Reset to preset").click().run()
    assert not at.sidebar.error and total(at) == BASE_TOTAL


def assert_rejected(at, name: str, value) -> None:
    assert not at.exception, (name, value, at.exception)
    assert field_errors(at, name), (name, value, [e.value for e in at.sidebar.error])
    assert "Some values in the sidebar are invalid" in messages(at)
    assert total(at) == BASE_TOTAL, (name, value)


INTS = [s.name for s in FIELDS.values() if s.type is int]
FLOATS = [s.name for s in FIELDS.values() if s.type is float]
LISTS = [s.name for s in FIELDS.values() if s.type is tuple]   # layer_types too: a list of choices
CHUNKS = 3   # the walk split into parts that pytest-xdist can run side by side


def test_every_field_is_walked_or_cannot_hold_junk():
    fixed = [s.name for s in FIELDS.values() if s.name not in LISTS and (s.type is bool or s.choices or s.type is str)]
    assert sorted(INTS + FLOATS + fixed + LISTS) == sorted(FIELDS)


def _walk(at, name: str) -> None:
    """The field's own out-of-range values, then back to the preset. Junk that fails to parse at all goes through
    the same code for every field of a type: test_unparsable_values_of_each_type_are_messages walks it once."""
    spec = FIELDS[name]
    box = lambda: at.sidebar.text_input(key=state.widget_key(name))   # noqa: E731 -- the widget after each run
    if spec.type is int:                 # every int field has lo = 1: zero is out of range
        box().input("0").run()
        assert_rejected(at, name, 0)
    elif spec.type is float:
        box().input("-1").run()
        assert_rejected(at, name, -1)
        box().input(str(10**12)).run()
        if spec.hi is not None:
            assert_rejected(at, name, 10**12)
        else:   # no upper bound by design: accepted, counts unchanged (no float field changes the parameters)
            assert not at.sidebar.error and getattr(at.session_state["cfg"], name) == 1e12
        box().input("").run()
        if spec.optional:   # empty means null: valid
            assert not at.sidebar.error and getattr(at.session_state["cfg"], name) is None
        else:
            assert_rejected(at, name, "")
    else:                                # comma-separated numbers; a bad item rejects the list, empty is null
        box().input("1,-1").run()
        assert_rejected(at, name, "1,-1")
        box().input("").run()
        assert not at.sidebar.error and getattr(at.session_state["cfg"], name) is None
    reset(at)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_every_field_out_of_range_is_a_message_and_keeps_the_view(new_app, chunk):
    at = new_app(preset=BASE)
    at.run()
    walked = (INTS + FLOATS + LISTS)[chunk::CHUNKS]
    for name in walked:
        _walk(at, name)
    assert len(walked) >= 20 and not at.exception and total(at) == BASE_TOTAL


@pytest.mark.parametrize("name, values", [
    ("n_layers", (-1, MIN_SAFE, 12.5, "1e400")),                     # below the box, a fraction, beyond a float
    ("attn_softcap", ("abc", "nan", "inf", "-inf")),
    ("ssm_proj_scales", ("abc", "1,,2", "nan", "[1, inf]")),
])
def test_unparsable_values_of_each_type_are_messages(new_app, name, values):
    at = new_app(preset=BASE)
    at.run()
    for value in values:
        at.sidebar.text_input(key=state.widget_key(name)).input(str(value)).run()
        assert_rejected(at, name, value)


@pytest.mark.parametrize("name", [s.name for s in FIELDS.values() if s.type is int])
def test_int_field_at_the_box_upper_bound_never_crashes(new_app, name):
    """MAX_SAFE is the largest value the browser's box holds; the engine has no upper bounds. Either a message
    names the field (a rule or the app's own limit) or the page shows the exact count of that config."""
    at = new_app(preset=BASE)
    at.run()
    at.sidebar.text_input(key=state.widget_key(name)).input(str(MAX_SAFE)).run()
    assert not at.exception
    if at.sidebar.error:
        assert any(name in e.value for e in at.sidebar.error) and total(at) == BASE_TOTAL   # maybe a rule's
    else:
        assert total(at) == f"{count_params(PRESETS[BASE].config.replace(**{name: MAX_SAFE})).total:,}"


def test_too_deep_is_a_message_not_a_stall(new_app):
    """Budgets are summed layer by layer: 10^9 layers would stall every page, so the app states its limit."""
    at = new_app(preset=BASE)
    at.run()
    at.sidebar.text_input(key=state.widget_key("n_layers")).input(str(state.MAX_LAYERS + 1)).run()
    assert_rejected(at, "n_layers", state.MAX_LAYERS + 1)
    assert "more than this app computes interactively" in field_errors(at, "n_layers")[0]
    at.sidebar.text_input(key=state.widget_key("n_layers")).input(str(state.MAX_LAYERS)).run()
    assert not at.exception and not at.sidebar.error
    assert total(at) == f"{count_params(PRESETS[BASE].config.replace(n_layers=state.MAX_LAYERS)).total:,}"


URL_CASES = {   # one link full of bad values (each names its field), one with cross-field rules
    "bad_values": {"preset": "nope", "n_layers": "abc", "d_model": "-1", "n_heads": "0", "vocab_size": "1e30",
                   "no_such_knob": "1", "context_length": ["512", "x"], "norm_eps": "9" * 5000 + "x",
                   "rope_fraction": "inf", "dropout": "nan"},
    "rules": {"preset": "gpt2", "n_kv_heads": "5", "position": "rope", "head_dim": "7", "n_layers": "3"},
}
URL_NAMES = {"bad_values": ["preset", "n_layers", "d_model", "n_heads", "vocab_size", "no_such_knob",
                            "context_length", "norm_eps", "rope_fraction", "dropout"],
             "rules": ["n_kv_heads", "head_dim"]}


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("case", list(URL_CASES))
def test_url_fuzz_every_page(new_app, page, case):
    at = new_app(page=f"pages/{page}.py", **URL_CASES[case])
    at.run()
    assert not at.exception, at.exception
    shown = messages(at)
    for name in URL_NAMES[case]:
        assert name in shown, (name, shown)
    assert not any("9" * 100 in w.value for w in at.warning)   # a 5,000-character value is not echoed whole
    cfg = at.session_state["cfg"]   # the bad keys are dropped, the rest of the link applies
    assert cfg.n_layers == (3 if case == "rules" else 12) and cfg.position == ("rope" if case == "rules"
                                                                              else "learned")
    assert total(at) == f"{count_params(cfg).total:,}"


HUGE = dict(d_model="65536", n_layers="1000", vocab_size=str(10**7), context_length=str(10**7),
            position="rope", n_heads="512", n_kv_heads="8", ffn="swiglu", attn_window="4096", global_every="4")


@pytest.mark.parametrize("page", PAGES)
def test_huge_valid_config_renders_every_page(new_app, page):
    """Metric rows from closed forms, pages that would build the model refuse with numbers; nothing allocates
    (a 1000-layer, 65536-wide model would need terabytes) and nothing hangs."""
    at = new_app(page=f"pages/{page}.py", **HUGE)
    at.run()
    assert not at.exception, at.exception
    assert not at.warning or "ignored" not in messages(at)   # the config itself is valid
    cfg = at.session_state["cfg"]
    assert cfg.d_model == 65536 and cfg.n_layers == 1000
    assert total(at) == f"{count_params(cfg).total:,}"
    if page == "budgets":   # the meta FLOP count would take ~20 ms a layer: refused, as is the real build
        at.button(key="b_measure").click().run()
        assert not at.exception and "n_layers: not counting FLOPs" in messages(at)
    refusal = {"budgets": "Not building a real model", "activations": "building a real model on CPU is limited",
               "latency": "refusing to build"}.get(page)
    if refusal:
        assert refusal in messages(at) and f"{count_params(cfg).total:,}" in messages(at)


def _upload(at, name: str, data: bytes) -> None:
    up = next(u for u in at.get("file_uploader") if "yaml_upload" in u.key)
    up.set_value((name, data, "application/x-yaml")).run()


ALIAS_BOMB = ("defs:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
              + "".join(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9))
              + "vocab_size: *a8\n").encode()
UPLOADS = [   # (file name, bytes, what the messages must say)
    ("binary.yaml", bytes(range(256)) * 8, "not UTF-8"),
    ("garbage.yaml", b"x" * (1 << 20), "the limit is 65,536 bytes"),
    ("object.yaml", b"d_model: !!python/object:os.system [echo hi]\n", "only plain values are allowed"),
    ("list.yaml", b"- d_model: 768\n- n_layers: 2\n", "got a list"),
    ("empty.yaml", b"", "the document is empty"),
    ("scalar.yaml", b"42\n", "got the single value 42"),
    ("broken.yaml", b"d_model: [1, 2\n", "not valid YAML"),
    ("unknown.yaml", b"d_modle: 512\n", "unknown key `d_modle` (did you mean d_model?)"),
    ("bad.yaml", b"n_layers: -2\nrope_fraction: 2\nffn: tanh\nnorm_eps: .nan\n",
     ("bad.yaml: n_layers: -2", "bad.yaml: rope_fraction: 2", "bad.yaml: ffn: 'tanh'", "bad.yaml: norm_eps: nan")),
    ("huge.yaml", f"vocab_size: {10**40}\nn_layers: {10**6}\n".encode(), "more than"),
    ("bomb.yaml", ALIAS_BOMB, "vocab_size:"),
]


def test_yaml_upload_edge_cases(new_app):
    at = new_app(preset=BASE)
    at.run()
    for name, data, want in UPLOADS:
        _upload(at, name, data)
        assert not at.exception, (name, at.exception)
        errors = [e.value for e in at.sidebar.error]
        assert errors and all(e.startswith(("yaml:", name)) for e in errors), (name, errors)
        for text in (want,) if isinstance(want, str) else want:
            assert any(text in e for e in errors), (name, text, errors)
        assert max(map(len, errors)) < 500, name
        assert total(at) == BASE_TOTAL, name


def test_lecture_heads_demo_at_its_input_maxima_is_refused(new_app):
    """D=4096, H=128, d_h=1024 are each allowed, but together the demo would build 2.1 billion parameters."""
    at = new_app(page="pages/lecture.py", section="heads")
    at.run()
    for key, top in (("lec_heads_d", 4096), ("lec_heads_h", 128), ("lec_heads_hd", 1024)):
        at.number_input(key=key).set_value(top)
    at.run()
    assert not at.exception
    assert any(e.value.startswith("d_model D, heads H, head_dim d_h:") for e in at.error)
