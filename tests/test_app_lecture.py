"""AppTest of the Lecture page: every section renders its worked numbers, the URL selects the section, present mode.

(AppTest sees st.plotly_chart only as an unknown element; the figures are tested in test_lecture_charts.)
"""
import pytest

from app.lecture_sections import SECTIONS
from engine.presets import PRESETS
from tests.conftest import ROOT
from tests.helpers import LECTURE_NUMBERS as EXPECTED

LECTURE = "pages/lecture.py"

def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def clean(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert not at.warning, [w.value for w in at.warning]


def test_expected_covers_every_section():
    assert set(EXPECTED) == set(SECTIONS)


def test_every_section_renders_its_numbers(new_app):
    at = new_app(page=LECTURE)
    at.run()
    for i, section in enumerate(SECTIONS):
        clean(at)
        assert at.header[0].value.startswith(f"{i + 1}. "), section
        shown = metrics(at)
        for label, value in EXPECTED[section].items():
            assert shown.get(label) == value, (section, label, shown.get(label))
        assert at.query_params["section"] == section
        if i < len(SECTIONS) - 1:
            at.button(key="lecture_next").click().run()
    assert at.button(key="lecture_next").disabled
    at.button(key="lecture_prev").click().run()
    assert at.query_params["section"] == "depth"


def test_section_query_param_selects_the_section(new_app):
    at = new_app(page=LECTURE, section="kvcache", d_model="1024")
    at.run()
    clean(at)
    assert at.header[0].value == "10. KV cache: MHA, GQA, MQA"
    assert at.selectbox(key="lecture_pick").value == "kvcache"
    assert metrics(at)["MQA (1 KV head)"] == "128.00 MiB"
    assert at.query_params["section"] == "kvcache" and at.query_params["d_model"] == "1024"  # config kept


def test_view_params_are_not_config_and_survive_a_knob_change(new_app):
    from app.state import config_from_params
    preset, cfg, problems = config_from_params({"preset": "gpt2", "section": "rope", "present": "1"})
    assert problems == [] and cfg == PRESETS["gpt2"].config
    at = new_app(page=LECTURE, section="kvcache", preset="llama-3-8b")
    at.run()
    at.sidebar.text_input(key="field_n_layers").input("16").run()
    clean(at)
    assert dict(at.query_params) == {"preset": "llama-3-8b", "n_layers": "16", "section": "kvcache"}
    assert at.header[0].value == "10. KV cache: MHA, GQA, MQA"
    at.switch_page(str(ROOT / "pages/design.py")).run()   # the sidebar's page links drop the query string:
    del at.query_params["section"]                         # back on the Lecture page, the same section
    at.switch_page(str(ROOT / LECTURE)).run()
    assert at.header[0].value == "10. KV cache: MHA, GQA, MQA" and at.query_params["section"] == "kvcache"


def test_unknown_section_is_reported(new_app):
    at = new_app(page=LECTURE, section="nope")
    at.run()
    assert "section: 'nope' is not one of activations" in at.warning[0].value
    assert at.header[0].value.startswith("1. ")


def test_present_mode_from_the_url(new_app):
    at = new_app(page=LECTURE, section="rope", present="1")
    at.run()
    clean(at)
    assert at.toggle(key="lecture_present").value is True
    assert "Total parameters" not in metrics(at)              # the config metric row gives way to the example
    assert metrics(at)["score at positions (2, 3)"] == "0.8660"
    assert not at.main.get("download_button") and not at.main.expander   # no handout or chart downloads on stage
    assert any('[data-testid="stSidebar"]' in h.proto.body for h in at.get("html"))   # the sidebar is hidden
    assert at.query_params["present"] == "1" and at.query_params["section"] == "rope"
    at.toggle(key="lecture_present").set_value(False).run()
    assert "present" not in at.query_params and "Total parameters" in metrics(at)
    assert not any("stSidebar" in h.proto.body for h in at.get("html"))


def test_present_toggle_and_bad_flag(new_app):
    at = new_app(page=LECTURE, present="maybe")
    at.run()
    assert "present: 'maybe' is not 1 or 0" in at.warning[0].value
    assert at.toggle(key="lecture_present").value is False
    at.toggle(key="lecture_present").set_value(True).run()
    assert at.query_params["present"] == "1"


@pytest.mark.parametrize("section,key,bad,message", [
    ("parallel", "lec_par_x", "1, two", "x: '1, two' is not a comma-separated list of numbers"),
    ("parallel", "lec_par_x", "5", "x: needs at least 2 coordinates"),
    ("zloss", "lec_z_logits", "", "logits: '' is not a comma-separated list of numbers"),
])
def test_bad_input_names_the_field(new_app, section, key, bad, message):
    at = new_app(page=LECTURE, section=section)
    at.run()
    at.text_input(key=key).set_value(bad).run()
    assert not at.exception
    assert message in at.error[0].value


def test_kv_variants_follow_the_head_count(new_app):
    at = new_app(page=LECTURE, section="kvcache")
    at.run()
    at.number_input(key="lec_kv_h").set_value(30).run()       # 8 KV heads do not divide 30: only MHA and MQA
    clean(at)
    assert "GQA-8 (8 KV heads)" not in metrics(at) and "MQA (1 KV head)" in metrics(at)


def test_ready_sweeps_one_click_each(new_app):
    at = new_app(page=LECTURE, section="sweeps")
    at.run()
    clean(at)
    for name, shown in (("gating", {"total parameters, ffn=gelu": "124,439,808"}),
                        ("depth", {"non-embedding parameters, n_layers=3": "84,997,632"}),   # 3*(12D²+13D)+2D, D=1536
                        ("window", {"KV cache, attn_window=full": "36.00 MiB", "KV cache, attn_window=4": "144.00 KiB"})):
        at.session_state["lec_sweep"] = name
        at.run()
        clean(at)
        for label, value in shown.items():
            assert metrics(at)[label] == value, (name, label, metrics(at))


def test_shares_carry_no_arrow_and_signed_changes_point_their_way(new_app):
    """'8.33% of MHA' is a share, a reduction at that: Streamlit drew it with an up arrow (any delta text without a
    minus sign reads as a rise). Only a signed change gets an arrow, pointing its way."""
    from streamlit.proto.Metric_pb2 import Metric
    at = new_app(page=LECTURE, section="mla")
    at.run()
    shares = [m for m in at.metric if m.proto.delta.endswith("of MHA")]
    assert shares and {m.proto.direction for m in shares} == {Metric.MetricDirection.NONE}
    at = new_app(page=LECTURE, section="gating")
    at.run()
    changes = {m.proto.delta: m.proto.direction for m in at.metric if m.proto.delta}
    assert changes == {"+0.00% vs dense": Metric.MetricDirection.UP, "+50% vs dense": Metric.MetricDirection.UP}
