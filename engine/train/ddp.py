"""Data-parallel training under `torchrun --nproc_per_node=N` (nccl on GPUs, gloo on CPU).

torchrun sets RANK, WORLD_SIZE and LOCAL_RANK; without them everything here is a no-op, so the same
training loop runs in one process or N. Each rank draws the same global batch and trains on its slice;
DDP averages the gradients, so N ranks take exactly the step one process takes on the whole batch.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """Only rank 0 logs, stores the run and samples."""
        return self.rank == 0

    def mean(self, t: torch.Tensor) -> torch.Tensor:
        if self.world > 1:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            t /= self.world
        return t

    def max(self, t: torch.Tensor) -> torch.Tensor:
        if self.world > 1:
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t


SINGLE = DistInfo()


def env_world() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


@contextmanager
def session(device_type: str) -> Iterator[DistInfo]:
    """Join the process group torchrun set up (or yield SINGLE when not launched by torchrun)."""
    if env_world() <= 1:
        yield SINGLE
        return
    info = DistInfo(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0)))
    if device_type == "cuda":
        torch.cuda.set_device(info.local_rank)
    dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo")
    try:
        yield info
        dist.barrier()   # rank 0 samples and stores after the others finish; tearing gloo down early aborts
    finally:
        dist.destroy_process_group()


def wrap(model: nn.Module, info: DistInfo) -> nn.Module:
    """DistributedDataParallel when there is more than one rank; gradients are averaged in backward."""
    if info.world <= 1:
        return model
    from torch.nn.parallel import DistributedDataParallel
    device = next(model.parameters()).device
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
