"""AppTest: the Deploy page shows the planner's per-GPU figures, follows its knobs and the URL, and names an
impossible layout instead of failing."""
from engine.plan import Layout, Setup, plan
from engine.presets import PRESETS
from engine.units import fmt_bytes


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_deploy_shows_the_plan_and_follows_the_url(new_app):
    at = new_app("pages/deploy.py", preset="llama-3-70b", finetune="qlora", gpus="1", zero="0", seq="1024")
    at.run()
    assert not at.exception   # (not `not at.error`: main's sidebar currently flags layer_types on every preset)
    ref = plan(PRESETS["llama-3-70b"].config, "h100-80gb", Layout(1), Setup(finetune="qlora", seq=1024,
                                                                             recompute="full"))
    assert _metric(at, "Per GPU (worst)") == fmt_bytes(ref.per_gpu["total"])
    assert any(s.value.startswith("Fits:") for s in at.success)
    assert _metric(at, "Trainable parameters") == f"{ref.trainable:,}"


def test_deploy_knobs_reach_the_url_and_bad_layouts_are_named(new_app):
    at = new_app("pages/deploy.py", preset="llama-3-8b")
    at.run()
    at.number_input(key="dep_tp").set_value(3).run()
    assert not at.exception
    assert any(e.value.startswith("tp: 3 does not divide n_heads = 32") for e in at.error)
    assert at.query_params["tp"] == ["3"] or at.query_params["tp"] == "3"
    at.number_input(key="dep_tp").set_value(2).run()
    at.button(key="dep_search").click().run()
    assert not at.exception and any("per GPU" in i.value for i in at.info)


def test_deploy_bad_url_value_is_named(new_app):
    at = new_app("pages/deploy.py", preset="gpt2", gpus="many", quant="int3")
    at.run()
    assert not at.exception
    assert any("gpus: 'many' is not an integer" in w.value for w in at.warning)
    assert any("quant: 'int3' is not one of none, int8" in w.value for w in at.warning)
    assert at.selectbox(key="dep_quant").value == "none"
