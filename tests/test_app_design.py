"""AppTest: the entry point, sidebar editor, URL sync and the Design page."""
from engine.budget.params import count_params
from engine.layers.norm import has_bias
from engine.presets import PRESETS


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_default_renders_gpt2(new_app):
    at = new_app()
    at.run()
    assert not at.exception
    assert metrics(at)["Total parameters"] == f"{PRESETS['gpt2'].reference_params:,}"
    assert "matches the reference" in " ".join(c.value for c in at.caption)


def test_preset_in_url_and_knob_updates_total_and_url(new_app):
    at = new_app(preset="llama-3-8b")
    at.run()
    assert metrics(at)["Total parameters"] == "8,030,261,248"
    at.sidebar.text_input(key="field_n_layers").input("16").run()
    want = count_params(PRESETS["llama-3-8b"].config.replace(n_layers=16)).total
    assert metrics(at)["Total parameters"] == f"{want:,}"
    assert at.query_params["preset"] == "llama-3-8b" and at.query_params["n_layers"] == "16"
    assert set(at.query_params) == {"preset", "n_layers"}   # only the fields that differ from the preset


def test_url_overrides_open_that_config(new_app):
    at = new_app(preset="llama-3-8b", n_layers="16")
    at.run()
    want = count_params(PRESETS["llama-3-8b"].config.replace(n_layers=16)).total
    assert metrics(at)["Total parameters"] == f"{want:,}"
    assert at.sidebar.text_input(key="field_n_layers").value == "16"


def test_bad_url_value_is_a_message(new_app):
    at = new_app(preset="gpt2", n_layers="zero")
    at.run()
    assert not at.exception
    assert any("n_layers" in w.value for w in at.warning)
    assert metrics(at)["Total parameters"] == "124,439,808"


def test_invalid_value_keeps_last_valid_view(new_app):
    at = new_app(preset="llama-3-8b")
    at.run()
    at.sidebar.text_input(key="field_n_kv_heads").input("5").run()
    assert not at.exception
    assert any("n_kv_heads: 5 does not divide n_heads=32" in e.value for e in at.sidebar.error)
    assert metrics(at)["Total parameters"] == "8,030,261,248"
    at.sidebar.text_input(key="field_d_model").input("0").run()
    assert any(e.value.startswith("d_model:") for e in at.sidebar.error)


def test_norm_bias_follows_the_norm_and_the_toggle_restores_the_count(new_app):
    at = new_app()   # gpt2: layernorm, norm_bias null = follow the norm (on)
    at.run()
    box = at.sidebar.selectbox(key="field_norm_bias")
    assert box.value == "null" and "follow the norm" in box.options   # one label whatever the norm (see editor)
    assert "Follows the norm: on for layernorm." in [c.value for c in at.sidebar.caption]
    at.sidebar.selectbox(key="field_norm").set_value("rmsnorm").run()
    assert not at.sidebar.error and not at.exception
    box = at.sidebar.selectbox(key="field_norm_bias")
    assert box.value == "null" and box.disabled and "follow the norm" in box.options
    assert any("follows the norm (off)" in c.value for c in at.sidebar.caption)
    cfg = at.session_state["cfg"]
    assert cfg.norm == "rmsnorm" and not has_bias(cfg)
    assert metrics(at)["Total parameters"] == f"{124_439_808 - 25 * 768:,}"   # 25 LayerNorm betas of width 768 gone
    assert dict(at.query_params) == {"preset": "gpt2", "norm": "rmsnorm"}
    at.sidebar.selectbox(key="field_norm").set_value("layernorm").run()
    assert metrics(at)["Total parameters"] == "124,439,808"
    assert dict(at.query_params) == {"preset": "gpt2"}


def test_explicit_norm_bias_true_gives_way_to_rmsnorm(new_app):
    at = new_app()
    at.run()
    at.sidebar.selectbox(key="field_norm_bias").set_value("true").run()
    assert at.session_state["cfg"].norm_bias is True
    at.sidebar.selectbox(key="field_norm").set_value("rmsnorm").run()
    assert not at.sidebar.error and at.session_state["cfg"].norm_bias is None


def test_validation_messages_are_plain_text(new_app):
    """head_dim*rope_fraction: the `*` must reach the page escaped, or Markdown turns it into italics."""
    at = new_app(preset="llama-3-8b")
    at.run()
    at.sidebar.text_input(key="field_rope_fraction").input("0.3").run()
    [err] = [e.value for e in at.sidebar.error if e.value.startswith("head_dim:")]
    assert "head_dim\\*rope_fraction" in err


def test_float_and_optional_fields(new_app):
    at = new_app()
    at.run()
    at.sidebar.text_input(key="field_logit_softcap").input("30").run()
    assert at.session_state["cfg"].logit_softcap == 30.0
    at.sidebar.text_input(key="field_logit_softcap").input("null").run()
    assert at.session_state["cfg"].logit_softcap is None
    at.sidebar.text_input(key="field_norm_eps").input("abc").run()
    assert any(e.value.startswith("norm_eps:") for e in at.sidebar.error)


def test_preset_picker_loads_preset(new_app):
    at = new_app()
    at.run()
    at.sidebar.selectbox(key="preset_pick").set_value("mistral-7b").run()
    assert metrics(at)["Total parameters"] == "7,241,732,096"
    assert dict(at.query_params) == {"preset": "mistral-7b"}


def test_two_sessions_are_isolated(new_app):
    a, b = new_app(), new_app()
    a.run()
    b.run()
    a.sidebar.text_input(key="field_n_layers").input("2").run()
    b.run()
    assert metrics(a)["Total parameters"] != metrics(b)["Total parameters"]
    assert metrics(b)["Total parameters"] == "124,439,808"


def test_plain_apptest_of_the_entry_point_keeps_the_sidebar():
    """AppTest.from_file on streamlit_app.py runs a page alone (the pages/ folder mode) from the second run
    on; current_config() reruns it through the entry point, so the sidebar and the URL config survive."""
    from streamlit.testing.v1 import AppTest

    from tests.conftest import APP
    from tests.helpers import APP_WAIT_S
    at = AppTest.from_file(str(APP), default_timeout=APP_WAIT_S)
    at.query_params["preset"] = "llama-3-8b"
    at.run()
    at.switch_page("pages/budgets.py").run()
    assert not at.exception
    assert at.title[0].value == "Budgets: llama-3-8b"
    assert at.sidebar.text_input(key="field_n_layers").value == "32"


def test_yaml_upload_applies_config_and_reports_problems(new_app):
    at = new_app()
    at.run()
    cfg = PRESETS["mistral-7b"].config.replace(n_layers=4)
    up = next(u for u in at.get("file_uploader") if "yaml_upload" in u.key)
    up.set_value(("m.yaml", cfg.to_yaml().encode(), "application/x-yaml")).run()
    assert not at.exception
    assert metrics(at)["Total parameters"] == f"{count_params(cfg).total:,}"
    assert at.query_params["n_layers"] == "4"
    up = next(u for u in at.get("file_uploader") if "yaml_upload" in u.key)
    up.set_value(("bad.yaml", b"d_model: -3\nwidth: 5\n", "application/x-yaml")).run()
    assert not at.exception
    errors = [e.value for e in at.sidebar.error]
    assert any("d_model" in e for e in errors) and any("unknown key `width`" in e for e in errors)
    assert metrics(at)["Total parameters"] == f"{count_params(cfg).total:,}"
    up = next(u for u in at.get("file_uploader") if "yaml_upload" in u.key)
    up.set_value(("big.yaml", b"#" * 70000, "application/x-yaml")).run()
    assert any("the limit is 65,536 bytes" in e.value for e in at.sidebar.error)


def test_design_page_draws_the_rope_frequencies_for_rope_only(new_app):
    at = new_app(preset="llama-3.1-8b")
    at.run()
    assert not at.exception
    assert "RoPE rotation frequencies" in [h.value for h in at.subheader]
    at = new_app(preset="gpt2")
    at.run()
    assert "RoPE rotation frequencies" not in [h.value for h in at.subheader]


def test_the_title_says_the_config_was_edited_from_its_preset(new_app):
    at = new_app(preset="llama-3-8b")
    at.run()
    assert at.title[0].value == "Design: llama-3-8b" and not any("Edited from" in c.value for c in at.caption)
    at.sidebar.text_input(key="field_n_layers").input("4").run()
    at.sidebar.selectbox(key="field_norm").set_value("layernorm").run()
    assert at.title[0].value == "Design: llama-3-8b (edited)"
    assert "Edited from the llama-3-8b preset: n_layers 32 → 4, norm rmsnorm → layernorm." in \
        [c.value for c in at.caption]
    at.sidebar.text_input(key="field_name").input("my-8b").run()      # renamed: the new name, the preset still said
    assert at.title[0].value == "Design: my-8b"
    assert any(c.value.startswith("Edited from the llama-3-8b preset: n_layers 32 → 4") for c in at.caption)
    at.sidebar.button[0].click().run()                                 # Reset to preset
    assert at.title[0].value == "Design: llama-3-8b"



def test_the_servers_upload_cap_is_a_training_texts_limit():
    """The Training page's uploader allows what engine.limits allows a training text (the server's cap; it was
    1 MiB under a 64 MiB limit); the YAML uploaders set their own (tests/test_browser_bad_input.py)."""
    import tomllib

    from engine.limits import MAX_DATA_BYTES
    from tests.conftest import ROOT
    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert server["maxUploadSize"] * 2**20 == MAX_DATA_BYTES


def test_bad_sidebar_values_get_a_message_naming_the_field_and_what_is_allowed(new_app):
    """Numbers are text boxes, so every typed value reaches validation: a browser number box refused 1e20 itself
    (a red frame, no message); an empty name was accepted; a bad list entry printed a Python tuple."""
    at = new_app()
    at.run()
    errors = lambda: [e.value.replace("\\", "") for e in at.sidebar.error]  # noqa: E731
    at.sidebar.text_input(key="field_d_model").input("1e20").run()
    assert "d_model: 100,000,000,000,000,000,000 is more than 9,007,199,254,740,991 (2^53 - 1, the largest " \
           "integer a browser or JSON holds exactly)" in errors()
    at.sidebar.text_input(key="field_d_model").input("12.5").run()
    assert "d_model: '12.5' is not an integer >= 1" in errors()
    at.sidebar.text_input(key="field_d_model").input("768").run()
    at.sidebar.text_input(key="field_name").input("  ").run()
    assert errors() == ["name: empty; give the config a label (any text)"]
    at.sidebar.text_input(key="field_name").input("gpt2").run()
    at.sidebar.text_input(key="field_layer_types").input(", ".join(["full"] * 11 + ["local"])).run()
    assert errors() == ["layer_types: entry 12 of 12, 'local', is not one of full, sliding, chunked, gdn, mamba2, "
                        "mamba1, none, or A+B side by side (A one of full, sliding, chunked; B one of gdn, mamba2, "
                        "mamba1)"]
    assert not at.exception and metrics(at)["Total parameters"] == "124,439,808"   # the last valid config
