"""Background training jobs and the A/B pairs: matched parameters, one knob changed, stop, error capture."""
from __future__ import annotations

import pytest

from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.presets import get_preset
from engine.train.data import load_names
from engine.train.jobs import AB_CHOICES, TrainJob, ab_configs, matched_gated_dff
from engine.train.loop import TrainConfig
from engine.train.small import small_version

SMALL = small_version(get_preset("gpt2").config)
TC = TrainConfig(steps=6, batch=8, seq=8, eval_every=3, samples=2)


@pytest.mark.parametrize("choice", list(AB_CHOICES))
def test_ab_pairs_differ_in_the_compared_knob_only(choice):
    a, b = ab_configs(SMALL, choice).values()
    diff = {k for k, v in a.to_dict().items() if b.to_dict()[k] != v} - {"name"}
    expected = {"LayerNorm vs RMSNorm": {"norm", "norm_bias"}, "dense vs SwiGLU": {"ffn", "d_ff"},
                "pre-norm vs post-norm": {"norm_placement"}, "learned positions vs RoPE": {"position"},
                "transformer vs hybrid": {"layer_types", "d_ff"}}[choice]
    assert diff <= expected and diff & expected


def test_dense_vs_swiglu_match_parameters():
    a, b = ab_configs(SMALL, "dense vs SwiGLU").values()
    assert matched_gated_dff(256) == 171
    ffn = lambda c: count_params(c).components["ffn"]  # noqa: E731
    assert abs(ffn(a) - ffn(b)) / ffn(a) < 0.01
    with pytest.raises(ValueError, match="comparison: 'x' is not one of"):
        ab_configs(SMALL, "x")


def test_a_job_trains_each_config_in_turn_on_the_same_data():
    job = TrainJob(ab_configs(SMALL, "LayerNorm vs RMSNorm"), TC, load_names(), device="cpu").start()
    job.join(120)
    assert not job.running and job.error is None and job.progress == 1.0
    assert (job.steps_done, job.total_steps) == (12, 12)
    assert list(job.results) == ["LayerNorm", "RMSNorm"]
    assert [len(r) for r in job.records.values()] == [6, 6]
    la, ra = (job.records[k][0].train_loss for k in ("LayerNorm", "RMSNorm"))
    assert la != ra and abs(la - ra) < 0.1          # same batch, same seed, different norm


def test_a_stopped_job_ends_early_and_errors_are_kept():
    job = TrainJob({"a": SMALL, "b": SMALL}, TC.replace(steps=10_000), load_names(), device="cpu")
    job.stop.set()
    job.start().join(60)
    assert job.results == {} and job.progress == 0.0 and (job.steps_done, job.total_steps) == (0, 20_000)
    bad = TrainJob({"a": SMALL.replace(position="learned")}, TC.replace(seq=4000), load_names(), device="cpu")
    bad.start().join(60)
    assert bad.error is not None and not bad.running


def test_matched_gated_width_is_two_thirds_rounded_and_at_least_one():
    assert [matched_gated_dff(d) for d in (1, 2, 3, 256, 3072)] == [1, 1, 2, 171, 2048]


def test_dense_vs_swiglu_from_a_gated_model_is_gelu_at_four_d_against_its_matched_swiglu():
    base = SMALL.replace(ffn="swiglu", d_ff=100, name="m")
    d = base.d_model
    assert ab_configs(base, "dense vs SwiGLU") == {
        "dense GELU": base.replace(ffn="gelu", d_ff=4 * d, name="m dense GELU"),
        "SwiGLU (matched params)": base.replace(ffn="swiglu", d_ff=round(8 * d / 3), name="m SwiGLU (matched params)")}


def test_a_job_trains_on_its_own_data_into_the_store_and_stops_mid_run(tmp_path):
    from engine.train.data import load_text
    from engine.train.store import RunStore
    store = RunStore(tmp_path / "runs.sqlite")
    text = load_text("abba baab " * 20)                 # not the TrainConfig's default source (names)
    job = TrainJob({"a": SMALL, "b": SMALL}, TC.replace(steps=200, eval_every=200, samples=0), text, store).start()
    assert job.device == "auto" and job._thread.daemon and job._thread.name == "explorer-train"
    job.join(0.01)
    assert job.running                                  # join(timeout) returned while the run goes on
    while job.steps_done < 2 and job.running:
        job.join(0.05)
    job.stop.set()
    job.join(60)
    assert job.error is None and list(job.results) == ["a"]          # b never started
    result = job.results["a"]
    assert result.status == "stopped" and 2 <= len(result.records) < 200
    assert result.model_config.vocab_size == text.vocab_size == 4     # BOS, space, a, b
    assert [(r["name"], r["status"], r["steps"]) for r in store.list_runs()] == \
        [(SMALL.name, "stopped", len(result.records))]


def test_a_job_with_a_ticket_waits_for_the_busy_slot_then_trains_and_frees_it():
    """On a server queue of one slot held by another session's run, the job waits (its place shown, nothing
    trained); once that run leaves it trains, and when it ends its slot goes to the next in line."""
    from engine.job_queue import DONE, JobQueue
    queue = JobQueue(limit=1, capacity=5)
    blocker = queue.enter("another session's run", 30.0)
    job = TrainJob({"a": SMALL}, TC.replace(steps=2, samples=0), load_names(), device="cpu",
                   ticket=queue.enter("training", 5.0)).start()
    assert job.waiting and job.ticket.position == 1 and job.steps_done == 0 and queue.running == 1
    blocker.leave()
    job.join(60)
    assert job.error is None and job.results["a"].status == "finished" and not job.cancelled
    assert (job.ticket.state, queue.running, queue.waiting) == (DONE, 0, 0)
    assert queue.counts == {"running": 2, "done": 2, "cancelled": 0}


def test_a_job_reports_the_device_it_was_given():
    job = TrainJob({"a": SMALL}, TC, load_names(), device="cuda:99").start()
    job.join(60)
    assert job.error.startswith("ValueError: device: 'cuda:99' ") and job.results == {}


@pytest.mark.parametrize("steps", [30, 25])
def test_run_estimate_is_each_configs_training_and_evaluation_passes(steps):
    """steps forward+backward passes plus (steps // eval_every + 2) x eval_batches forward passes, per config,
    each priced by its closed-form FLOPs (call_seconds); two configs take the sum of their own times. 25 steps
    at eval_every=10 evaluate at steps 10 and 20 (plus the first and the last): whole evaluations, never 2.5."""
    import torch

    from engine.measure.estimate import call_seconds
    from engine.train.jobs import run_estimate_s
    from engine.train.loop import model_for
    data = load_names()
    tc = TrainConfig(steps=steps, batch=4, seq=16, eval_every=10, eval_batches=3)
    a = ModelConfig(name="a", d_model=32, n_layers=2, n_heads=4, ffn_multiple_of=8)
    b = a.replace(name="b", n_layers=4)
    cpu = torch.device("cpu")

    def by_hand(c: ModelConfig) -> float:
        m = model_for(c, data, tc)
        return (steps * call_seconds(m, 4, 16, "train", "fp32", cpu)
                + (steps // 10 + 2) * 3 * call_seconds(m, 4, 16, "forward", "fp32", cpu))
    assert run_estimate_s({"a": a}, tc, data, "cpu") == pytest.approx(by_hand(a), rel=1e-12)
    assert run_estimate_s({"a": a, "b": b}, tc, data, "auto") == pytest.approx(by_hand(a) + by_hand(b), rel=1e-12)
    assert by_hand(b) > by_hand(a) > 0
    with pytest.raises(ValueError, match="mode: 'infer' is not one of forward, train"):
        call_seconds(a, 4, 16, "infer", "fp32", cpu)


def test_the_queue_estimate_prices_the_device_the_run_will_use(monkeypatch):
    """The Training page queues a run with its estimated seconds: with device auto on a CUDA machine the run
    trains on the GPU (engine.runtime.resolve_device), so the estimate must price the GPU, not the CPU."""
    import torch

    import engine.runtime
    import engine.train.jobs as jobs
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    priced = []
    monkeypatch.setattr(jobs, "call_seconds", lambda m, b, s, mode, dtype, dev: priced.append(dev) or 1.0)
    tc = TrainConfig(steps=2, batch=2, seq=8, eval_every=1, eval_batches=1)
    cfg = ModelConfig(name="a", d_model=32, n_layers=1, n_heads=4, ffn_multiple_of=8)
    jobs.run_estimate_s({"a": cfg}, tc, load_names(), "auto")
    assert engine.runtime.default_device() == "cuda" and set(priced) == {torch.device("cuda")}
    priced.clear()
    jobs.run_estimate_s({"a": cfg}, tc, load_names(), "cpu")
    assert set(priced) == {torch.device("cpu")}
