"""Run under `torchrun --nproc_per_node=2` by tests/test_sharding.py: one training step of a small model under
FSDP2 and under tensor parallelism, then each rank writes its own parameter, gradient and AdamW-state bytes
to OUT/<mode>-<rank>.json."""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

from engine.config import ModelConfig
from engine.model import build_model
from engine.train.ddp import DistInfo
from engine.train.loop import TrainConfig, _optimizer
from engine.train.sharding import clip_grad_norm, parallelize, rank_bytes

CONFIGS = {   # odd sizes on purpose: the vocabulary (37 rows), d_ff (35) and the 5 query heads (30 rows) split unevenly under FSDP
    "fsdp": ModelConfig(name="odd", vocab_size=37, context_length=16, d_model=30, n_layers=2, n_heads=5,
                        n_kv_heads=1, ffn="swiglu", d_ff=35, norm="rmsnorm", norm_bias=False, position="rope", bias=True),
    "tp": ModelConfig(name="even", vocab_size=37, context_length=16, d_model=24, n_layers=2, n_heads=4,
                      n_kv_heads=2, ffn="swiglu", d_ff=40, position="rope", bias=True, tie_embeddings=False),
}


def main(out: str) -> None:
    dist.init_process_group("gloo")
    info = DistInfo(dist.get_rank(), dist.get_world_size(), 0)
    for mode, cfg in CONFIGS.items():
        model = build_model(cfg, seed=0)
        parallelize(model, info, mode)
        opt = _optimizer(model, TrainConfig())
        x = torch.randint(cfg.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
        F.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
        clip_grad_norm(list(model.parameters()), 1.0)
        opt.step()
        with open(os.path.join(out, f"{mode}-{info.rank}.json"), "w") as f:
            json.dump(rank_bytes(model, opt), f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
