"""DDP: `torchrun --nproc_per_node=2` on CPU (gloo) follows the single-process curve at the same global batch.

Each rank draws the same global batch and trains on its half; DDP averages the gradients, so the two runs
take the same steps up to float reduction order. Tolerance: 1e-4 absolute on every step's train loss
(measured differences are around 1e-6).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.train.store import RunStore
from tests.helpers import SUBPROCESS_WAIT_S, TRAIN_ARGS, free_port

ROOT = Path(__file__).resolve().parents[1]
ARGS = TRAIN_ARGS


@pytest.mark.slow
def test_two_gloo_processes_match_one_process(tmp_path):
    env = {**os.environ, "EXPLORER_HOME": str(tmp_path), "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
           "CUDA_VISIBLE_DEVICES": ""}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
                f"--master_port={free_port()}"]
    for cmd in (torchrun + ARGS, [sys.executable] + ARGS):
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=SUBPROCESS_WAIT_S)
        assert done.returncode == 0, done.stderr[-3000:]
    store = RunStore(tmp_path / "runs.sqlite")
    single, multi = (store.get_run(r["id"]) for r in store.list_runs())   # newest first
    assert (multi["world"], single["world"]) == (2, 1)
    assert len(multi["steps"]) == len(single["steps"]) == 12
    for a, b in zip(multi["steps"], single["steps"]):
        assert abs(a["train_loss"] - b["train_loss"]) < 1e-4, (a, b)
        assert (a["val_loss"] is None) == (b["val_loss"] is None)
        if a["val_loss"] is not None:
            assert abs(a["val_loss"] - b["val_loss"]) < 1e-4
    assert single["steps"][-1]["train_loss"] < single["steps"][0]["train_loss"]
