"""Fine-tuning methods: which parameters train, and the LoRA adapters added beside frozen matrices.

full    every parameter trains.
lora    the base is frozen; each targeted matrix W (out x in) gains A (r x in) and B (out x r):
        r * (in + out) trainable parameters per targeted matrix, summed over layers (peft's count).
qlora   lora on a base stored as NF4 with double quantization (Dettmers et al. 2023) unless another quant is set.
Gradients and optimizer state exist only for trainable parameters. Target names follow the Llama/peft modules.
"""
from __future__ import annotations

from engine.config import ModelConfig
from engine.plan.tensors import Tensor, param_tensors

METHODS = ("full", "lora", "qlora")
TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
HF_NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
            "down": "down_proj"}
DEFAULT_TARGETS = ("q", "v")     # peft's default for Llama-family models


def target_problems(targets: tuple[str, ...], rank: int) -> list[str]:
    bad = [t for t in targets if t not in TARGETS]
    out = [f"lora_targets: {', '.join(bad)} not among {', '.join(TARGETS)}"] if bad else []
    if not targets:
        out.append("lora_targets: name at least one of " + ", ".join(TARGETS))
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        out.append(f"lora_rank: {rank!r} is not an integer >= 1")
    return out


def adapter_tensors(cfg: ModelConfig, rank: int, targets: tuple[str, ...]) -> list[tuple[Tensor, Tensor, Tensor]]:
    """(base matrix, A, B) for every targeted matrix; A is (r, in), B is (out, r)."""
    out = []
    for t in param_tensors(cfg):
        if t.role in targets:
            rows, cols = t.shape
            module = t.name.removesuffix(".weight")   # peft's parameters: <module>.lora_A.<adapter>.weight
            out.append((t, Tensor(module + ".lora_A.weight", (rank, cols), "lora_A." + t.role, t.layer, "adapter"),
                        Tensor(module + ".lora_B.weight", (rows, rank), "lora_B." + t.role, t.layer, "adapter")))
    return out


def lora_trainable(cfg: ModelConfig, rank: int, targets: tuple[str, ...] = DEFAULT_TARGETS) -> int:
    """Sum over targeted matrices of r * (in + out)."""
    return sum(a.numel + b.numel for _, a, b in adapter_tensors(cfg, rank, targets))
