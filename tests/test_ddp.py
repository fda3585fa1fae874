"""DDP: `torchrun --nproc_per_node=2` on CPU (gloo) follows the single-process curve at the same global batch.

Each rank draws the same global batch and trains on its half; DDP averages the gradients, so the two runs
take the same steps up to float reduction order. Tolerance: 1e-4 absolute on every step's train loss
(measured differences are around 1e-6).
"""
from __future__ import annotations

import pytest

from tests.torchrun_runs import TRAIN_ARGS, assert_same_curve, stored_train_run, torchrun


@pytest.mark.slow
def test_two_gloo_processes_match_one_process(tmp_path, one_process_run):
    assert_same_curve(stored_train_run(torchrun() + TRAIN_ARGS, tmp_path), one_process_run)
    steps = one_process_run["steps"]
    assert steps[-1]["train_loss"] < steps[0]["train_loss"]
