"""The gpt-oss-20b preset in the app: the Design page shows transformers' exact count, the editor offers the
new fields with their help text, and the clamped SwiGLU's fields say when the FFN does not read them."""


def _captions(at) -> str:
    return "\n".join(c.value for c in at.sidebar.caption)


def test_gpt_oss_preset_renders_with_its_exact_count(new_app):
    at = new_app(preset="gpt-oss-20b")
    at.run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Total parameters"] == "20,914,757,184"
    assert at.sidebar.checkbox(key="field_attn_sinks").value is True
    assert "softmax" in at.sidebar.checkbox(key="field_attn_sinks").help
    assert at.sidebar.selectbox(key="field_ffn").value == "swiglu_clamped"
    assert "Only used with ffn = swiglu_clamped" not in _captions(at)


def test_sinks_toggle_changes_the_count_by_one_logit_per_head_per_layer(new_app):
    at = new_app()   # gpt2: 12 layers of 12 heads
    at.run()
    assert "Only used with ffn = swiglu_clamped" in _captions(at)
    at.sidebar.checkbox(key="field_attn_sinks").check().run()
    assert not at.exception and dict(at.query_params) == {"preset": "gpt2", "attn_sinks": "true"}
    assert {m.label: m.value for m in at.metric}["Total parameters"] == f"{124_439_808 + 12 * 12:,}"


def test_diagram_draws_the_sinks_from_the_block_layout():
    from app.diagram import block_dot
    from engine.presets import PRESETS
    cfg = PRESETS["gpt-oss-20b"].config
    assert "softmax with the sink" in block_dot(cfg) and "learned logit per head" in block_dot(cfg)
    assert "sink" not in block_dot(cfg.replace(attn_sinks=False))
