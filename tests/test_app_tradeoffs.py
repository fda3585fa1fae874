"""Trade-offs page (AppTest): a closed-form sweep from the URL, edits written back to the URL, bad links, present
mode, and a small measured sweep whose training runs show in Training's stored runs. Figures: test_sweep_charts."""
from __future__ import annotations

from engine.train.store import RunStore
from tests.conftest import ROOT

PAGE = "pages/tradeoffs.py"


def table(at) -> list[dict]:
    return at.dataframe[-1].value.to_dict("records")


def test_closed_form_sweep_from_the_url(new_app):
    at = new_app(PAGE, preset="llama-3-8b", knob="n_kv_heads", values="1,2,4,8,32,5")
    at.run()
    assert not at.exception and at.title[0].value == "Trade-offs: llama-3-8b"
    rows = table(at)
    assert [r["n_kv_heads"] for r in rows] == ["1", "2", "4", "8", "32", "5"]
    assert [r["KV cache"] for r in rows[:5]] == ["128.00 MiB", "256.00 MiB", "512.00 MiB", "1.00 GiB", "4.00 GiB"]
    assert rows[3]["total parameters"] == "8,030,261,248" and rows[5]["total parameters"] == "—"
    assert any("n_kv_heads: 5 does not divide n_heads=32" in w.value for w in at.warning)
    assert at.query_params["knob"] == "n_kv_heads" and at.query_params["values"] == "1,2,4,8,32,5"


def test_editing_the_sweep_writes_the_url_and_equal_params_holds(new_app):
    at = new_app(PAGE, preset="llama-3-8b")
    at.run()
    at.selectbox(key="sw_knob").set_value("ffn").run()
    at.selectbox(key="sw_hold").set_value("d_ff").run()
    assert not at.exception
    assert at.query_params["knob"] == "ffn" and at.query_params["hold"] == "d_ff"
    rows = table(at)
    assert len(rows) == 9 and {r["total parameters"] for r in rows} == {"8,030,261,248"}   # exact for llama-3-8b
    assert [r["d_ff"] for r in rows[:1] + rows[4:5]] == [21504, 14336]


def test_bad_link_values_are_named_and_the_rest_applies(new_app):
    at = new_app(PAGE, knob="n_kv_head", values="1,x", context="abc")
    at.run()
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "knob: 'n_kv_head' is not a config field" in warnings and "context: 'abc'" in warnings
    assert any("values: n_kv_heads: 'x' is not an integer" in e.value for e in at.error)


def test_present_mode_hides_title_and_table(new_app):
    at = new_app(PAGE, knob="attn_window", present="1")
    at.run()
    assert not at.exception and not at.title and not at.dataframe
    assert at.toggle(key="sweep_present").value is True
    settings = [e for e in at.expander if e.label == "Sweep settings"]
    assert len(settings) == 1 and not settings[0].proto.expanded     # on stage: the charts, the settings folded


def test_small_measured_sweep_stores_runs_shown_on_training(new_app):
    at = new_app(PAGE, preset="microgpt", knob="n_kv_heads", values="1,4")
    at.run()
    at.checkbox(key="sw_loss").check()
    at.number_input(key="sw_steps").set_value(3)
    at.number_input(key="sw_budget").set_value(1)
    at.number_input(key="sw_seq").set_value(8)
    at.run()
    at.button(key="sw_start").click().run()
    job = at.session_state["sweep_job"]
    job.join(120)
    assert not job.running and job.error is None
    at.run()
    assert not at.exception
    rows = table(at)
    assert all(r["forward latency"].endswith(" ms") and r["val loss after a short run"].endswith(" nats")
               for r in rows)
    ids = [r["run"] for r in rows]
    stored = {r["id"]: r for r in RunStore().list_runs()}
    assert sorted(ids) == sorted(stored) and all(stored[i]["status"] == "finished" for i in ids)
    assert any("Training → Stored runs" in s.value for s in at.success)
    at.switch_page(str(ROOT / "pages/training.py")).run()
    names = list(at.dataframe[-1].value["name"])
    assert sorted(names) == sorted(stored[i]["name"] for i in ids) and any("n_kv_heads=1" in n for n in names)
