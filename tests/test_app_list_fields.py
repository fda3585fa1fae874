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


def test_editing_layer_kinds_makes_a_hybrid(new_app):
    """Three Gated DeltaNet layers per attention layer, typed into the sidebar: the KV cache is a quarter of GPT-2's
    (only the attention layers hold one) and a hybrid's FFN list is checked per layer."""
    at = new_app().run()
    kv = next(m.value for m in at.metric if m.label.startswith("KV cache"))
    at.sidebar.text_input(key=state.widget_key("layer_types")).set_value(", ".join(["gdn", "gdn", "gdn", "full"] * 3))
    at.run()
    assert not at.exception and not [e for e in at.error if "layer_types" in e.value]
    assert next(m.value for m in at.metric if m.label.startswith("KV cache")) == "9.00 MiB" != kv == "36.00 MiB"
    at.sidebar.text_input(key=state.widget_key("ffn_types")).set_value("dense, moe").run()
    assert any("ffn_types: 2 entries for n_layers=12" in e.value for e in at.error)
