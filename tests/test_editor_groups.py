"""The sidebar editor draws only open groups' widgets (a rerun with ~80 widgets was most of a knob change's server
time): a new session has Sizes open; a group opened later shows the current config's values; the fields of
closed groups keep the config through edits elsewhere; a group with an invalid value opens itself."""
from __future__ import annotations

from app.editor import group_key
from engine.config import FIELDS
from engine.presets import PRESETS


def keys(at) -> set[str]:
    return {w.key for kind in (at.sidebar.number_input, at.sidebar.text_input, at.sidebar.selectbox,
                               at.sidebar.checkbox) for w in kind if w.key and w.key.startswith("field_")}


def test_a_new_session_draws_only_the_sizes_group(new_app):
    at = new_app(editor_open=False, preset="llama-3-8b")
    at.run()
    assert keys(at) == {f"field_{n}" for n, s in FIELDS.items() if s.group == "sizes"}


def test_an_opened_group_shows_the_config_and_closed_fields_keep_it(new_app):
    at = new_app(editor_open=False, preset="llama-3-8b")
    at.run()
    at.sidebar.text_input(key="field_n_layers").input("16").run()          # an edit while attention is closed
    cfg = at.session_state["cfg"]
    assert cfg == PRESETS["llama-3-8b"].config.replace(n_layers=16)             # n_kv_heads=8 etc. kept
    at.session_state[group_key("attention")] = True
    at.run()
    assert at.sidebar.text_input(key="field_n_kv_heads").value == "8"
    at.sidebar.text_input(key="field_n_kv_heads").input("4").run()
    at.session_state[group_key("attention")] = False
    at.run()
    at.sidebar.text_input(key="field_n_layers").input("20").run()
    assert at.session_state["cfg"] == PRESETS["llama-3-8b"].config.replace(n_layers=20, n_kv_heads=4)
    assert "field_n_kv_heads" not in keys(at)


def test_a_group_with_an_invalid_value_opens_itself(new_app):
    at = new_app(editor_open=False)
    at.session_state[group_key("attention")] = True
    at.run()
    at.sidebar.text_input(key="field_n_kv_heads").input("5").run()
    at.session_state[group_key("attention")] = False           # closed with the invalid value in it
    at.run()
    assert "field_n_kv_heads" in keys(at) and at.sidebar.text_input(key="field_n_kv_heads").value == "5"
    assert any("does not divide" in e.value for e in at.sidebar.error)
    assert any(e.label.startswith("Attention — check values") for e in at.sidebar.expander)
