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


def test_inference_mode_answers_serving_and_hides_training(new_app):
    """Inference: no ZeRO, recompute or MFU control and no training time; the longest context, concurrent requests
    and tokens/s metrics are the engine's (engine.plan.serve / speed), and the serving summary names them."""
    at = new_app("pages/deploy.py", preset="llama-3.1-8b", mode="infer", gpu="rtx-4090-24gb", gpus="1",
                 quant="gguf:Q4_K_M", seq="8192", request="32768")
    at.run()
    assert not at.exception
    keys = {w.key for w in at.selectbox} | {w.key for w in at.number_input}
    assert not {"dep_zero", "dep_recompute", "dep_mfu", "dep_tokens"} & keys
    assert {"dep_kv_quant", "dep_engine", "dep_efficiency", "dep_request"} <= keys
    cfg = PRESETS["llama-3.1-8b"].config
    ref = plan(cfg, "rtx-4090-24gb", Layout(1, zero=0), Setup(mode="infer", seq=8192, quant="gguf:Q4_K_M"),
               request_tokens=32768)
    assert _metric(at, "Longest context") == f"{ref.capacity.max_context:,} tokens"
    assert _metric(at, "Requests at once") == f"{ref.capacity.max_concurrency:.2f}×"
    assert _metric(at, "Tokens/s per user") == f"{ref.speed.per_user:,.1f}"
    text = " ".join(m.value for m in at.markdown)
    assert "llama.cpp" in text and "concurrent requests of 32,768 tokens" in text and "days" not in text
    assert not any("Time and cost" in h.value for h in at.subheader)


def test_qlora_shows_its_4bit_storage_and_a_fine_tune_asks_for_a_budget(new_app):
    at = new_app("pages/deploy.py", preset="llama-3-8b", finetune="qlora", gpus="1", zero="0", seq="1024",
                 currency="EUR", price="3")
    at.run()
    assert not at.exception
    assert at.selectbox(key="dep_quant").value == "nf4-dq"                     # what QLoRA applies, shown
    assert any("Give a token budget" in i.value for i in at.info)
    at.number_input(key="dep_tokens").set_value(10**8).run()
    cost = plan(PRESETS["llama-3-8b"].config, "h100-80gb", Layout(1), Setup(finetune="qlora", seq=1024,
                                                                            recompute="full"),
                tokens=10**8, price=3, currency="EUR").cost
    assert any(f"{cost.train_cost:,.0f} EUR" in m.value for m in at.markdown)
    assert at.query_params["tokens"] in (["100000000"], "100000000")


def test_a_model_shipped_quantized_names_its_format_and_sizes_it_as_published(new_app):
    at = new_app("pages/deploy.py", preset="gpt-oss-20b", mode="infer", gpu="rtx-4090-24gb", gpus="1", seq="4096")
    at.run()
    assert any(e.value.startswith("Does not fit") for e in at.error)            # bf16: 39 GiB on a 24 GiB card
    assert any("ships in mxfp4" in i.value for i in at.info)
    at.button(key="dep_published").click().run()
    assert not at.exception and at.selectbox(key="dep_quant").value == "checkpoint"
    assert any(s.value.startswith("Fits:") for s in at.success)
