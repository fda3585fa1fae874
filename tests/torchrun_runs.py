"""Training runs for the torchrun tests (test_ddp, test_sharding): the short run's arguments, a free local port,
two CPU ranks over gloo, a run stored and read back, and one curve held against another."""
from __future__ import annotations

from pathlib import Path

from tests.helpers import SUBPROCESS_WAIT_S

TRAIN_ARGS = ["-m", "engine", "train", "--steps", "12", "--batch", "8", "--seq", "16", "--eval-every", "6",
              "--samples", "0", "--json"]


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_env(home) -> dict:
    """Two CPU ranks over gloo on the loopback, one thread each, storing runs under `home`."""
    import os
    return {**os.environ, "EXPLORER_HOME": str(home), "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
            "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


def torchrun() -> list[str]:
    import sys
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
            f"--master_port={free_port()}"]


# A rank that dies in C++ with this line (SIGABRT), once in many runs of the same command: gloo's worker threads can
# still hold work whose tensors Python frees during interpreter shutdown (pytorch/pytorch#179291). Seen once, in
# the TP run of a fresh clone; the same launch is tried once more in a fresh home, and a second failure fails.
GLOO_SHUTDOWN_ABORT = "terminate called without an active exception"


def stored_train_run(cmd: list[str], home) -> dict:
    """Run `python -m engine train ...` (alone or under torchrun) with its store under `home`; the stored run."""
    import subprocess
    from engine.train.store import RunStore
    root = Path(__file__).resolve().parents[1]

    def launch(cmd: list[str], home: Path) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, cwd=root, env=torchrun_env(home), capture_output=True, text=True,
                              timeout=SUBPROCESS_WAIT_S)
    home = Path(home)
    done = launch(cmd, home)
    if done.returncode != 0 and GLOO_SHUTDOWN_ABORT in done.stderr and "torch.distributed.run" in cmd:
        home = home / "second launch"
        port = next(i for i, a in enumerate(cmd) if a.startswith("--master_port="))
        done = launch([*cmd[:port], f"--master_port={free_port()}", *cmd[port + 1:]], home)
    assert done.returncode == 0, done.stderr[-3000:]
    store = RunStore(home / "runs.sqlite")
    return store.get_run(store.list_runs()[0]["id"])   # newest first


def assert_same_curve(multi: dict, single: dict) -> None:
    """Two ranks follow the one-process curve: every step's train and val loss within 1e-4 (float reduction order
    differs; measured differences are around 1e-6)."""
    assert (multi["world"], single["world"]) == (2, 1)
    assert len(multi["steps"]) == len(single["steps"]) == 12
    for a, b in zip(multi["steps"], single["steps"]):
        assert abs(a["train_loss"] - b["train_loss"]) < 1e-4, (a, b)
        assert (a["val_loss"] is None) == (b["val_loss"] is None)
        if a["val_loss"] is not None:
            assert abs(a["val_loss"] - b["val_loss"]) < 1e-4
