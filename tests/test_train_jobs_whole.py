"""The A/B pairs whole (labels, names and each side's knob by hand) and a job's progress counted by hand."""
from __future__ import annotations

import pytest

from engine.presets import get_preset
from engine.train.data import load_names
from engine.train.jobs import ab_configs
from engine.train.loop import RunResult, StepRecord, TrainConfig
from engine.train.jobs import TrainJob
from engine.train.small import small_version

SMALL = small_version(get_preset("gpt2").config)     # d_model 64, 2 layers, gelu, learned positions, layernorm


def test_every_pair_is_labelled_and_named_for_the_page():
    got = {choice: {label: c for label, c in ab_configs(SMALL, choice).items()} for choice in (
        "LayerNorm vs RMSNorm", "dense vs SwiGLU", "pre-norm vs post-norm", "learned positions vs RoPE",
        "transformer vs hybrid")}
    assert {choice: [(label, c.name) for label, c in pair.items()] for choice, pair in got.items()} == {
        "LayerNorm vs RMSNorm": [("LayerNorm", "gpt2-small LayerNorm"), ("RMSNorm", "gpt2-small RMSNorm")],
        "dense vs SwiGLU": [("dense GELU", "gpt2-small dense GELU"),
                            ("SwiGLU (matched params)", "gpt2-small SwiGLU (matched params)")],
        "pre-norm vs post-norm": [("pre-norm", "gpt2-small pre-norm"), ("post-norm", "gpt2-small post-norm")],
        "learned positions vs RoPE": [("learned", "gpt2-small learned"), ("RoPE", "gpt2-small RoPE")],
        "transformer vs hybrid": [("transformer (equal params)", "gpt2-small transformer (equal params)"),
                                  ("hybrid (1 attention of 2, Gated DeltaNet)",
                                   "gpt2-small hybrid (1 attention of 2, Gated DeltaNet)")]}
    ln, rms = got["LayerNorm vs RMSNorm"].values()
    assert (ln.norm, rms.norm, rms.norm_bias) == ("layernorm", "rmsnorm", False)
    dense, swiglu = got["dense vs SwiGLU"].values()
    assert (dense.ffn, dense.d_ff, swiglu.ffn, swiglu.d_ff) == ("gelu", 256, "swiglu", 171)   # 2/3 of 4 x 64
    pre, post = got["pre-norm vs post-norm"].values()
    assert (pre.norm_placement, post.norm_placement) == ("pre", "post")
    learned, rope = got["learned positions vs RoPE"].values()
    assert (learned.position, rope.position, rope.rope_fraction) == ("learned", "rope", 1.0)


def test_progress_counts_a_finished_run_whole_and_a_running_one_by_its_steps():
    cfgs = {"a": SMALL, "b": SMALL, "c": SMALL}
    job = TrainJob(cfgs, TrainConfig(steps=10), load_names())
    assert (job.total_steps, job.steps_done, job.progress, job.running, job.error) == (30, 0, 0.0, False, None)
    job.records["a"].extend(StepRecord(i, 1.0, 1e-3, 1.0, 1.0, 1.0, 1.0) for i in range(1, 4))
    job.results["a"] = RunResult("stopped", "", job.records["a"], SMALL, 1)     # ended early at 3 steps
    job.records["b"].extend(StepRecord(i, 1.0, 1e-3, 1.0, 1.0, 1.0, 1.0) for i in range(1, 6))
    assert (job.steps_done, job.progress) == (8, pytest.approx(15 / 30))
    assert job.device == "auto" and job.store is None and job.ticket is None and not job.stop.is_set()
