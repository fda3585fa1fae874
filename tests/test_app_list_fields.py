"""List-valued fields (layer_types, nope_layers, LongRoPE factors) are edited as comma-separated text."""
from __future__ import annotations

from app import state


def test_list_fields_are_text_boxes_and_stay_null_across_reruns(new_app):
    at = new_app().run()
    assert state.widget_key("layer_types") in [w.key for w in at.sidebar.text_input]   # not a one-item selectbox
    at.run()
    assert not at.exception and not [e for e in at.error if "layer_types" in e.value]
    box = at.sidebar.text_input(key=state.widget_key("layer_types"))
    assert box.value == "null"
    box.set_value("full, sliding").run()
    assert any("layer_types: 2 entries for n_layers=12" in e.value for e in at.error)
    at.sidebar.text_input(key=state.widget_key("layer_types")).set_value(", ".join(["full"] * 12)).run()
    assert not [e for e in at.error if "layer_types" in e.value]
