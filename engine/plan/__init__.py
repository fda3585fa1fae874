"""Will it fit, and what will it cost: per-GPU memory under quantization, fine-tuning and parallelism.

plan(cfg, gpu, layout, setup) prices the worst GPU (every pipeline stage on data rank 0, which holds the largest
chunks) and says whether it fits; smallest_layout() searches the layouts that do. Modules: tensors (shapes),
quant (bytes under a scheme), finetune (LoRA adapters), parallel (the slice a GPU holds), memory (components),
cost (time and money).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.budget.devices import DEVICE_PROFILES, DeviceProfile
from engine.budget.params import count_params
from engine.budget.memory import OPTIMIZERS, POLICIES, RECOMPUTE, POLICY_DTYPE
from engine.config import ModelConfig
from engine.plan.cost import Cost, cost
from engine.plan.finetune import METHODS, lora_trainable, target_problems
from engine.plan.memory import COMPONENTS, Setup, gpu_memory, high_dtype
from engine.plan.parallel import Layout, layout_problems
from engine.plan.quant import KEEP_CHOICES, KV_QUANTS, WEIGHT_QUANTS
from engine.validation import choice_problem, int_problem, number_problem, require

GPUS = {"h100-80gb": "H100", "h200-141gb": "H200", "a100-80gb": "A100", "rtx-4090-24gb": "RTX 4090"}
MODES = ("train", "infer")


@dataclass(frozen=True)
class Plan:
    per_gpu: dict[str, int]               # the worst GPU: COMPONENTS + total
    per_stage: list[dict[str, int]]       # one per pipeline stage (data rank 0)
    memory_bytes: int
    fits: bool
    margin_bytes: int                     # memory - total (negative: short by that much)
    layout: Layout
    setup: Setup
    high_precision: list[str]             # what stays unquantized
    cost: Cost
    trainable: int                        # trainable parameters (all of them, or the LoRA adapters)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        lay = self.layout
        return {"per_gpu": self.per_gpu, "fits": self.fits, "margin_bytes": self.margin_bytes,
                "memory_bytes": self.memory_bytes, "per_stage": self.per_stage,
                "layout": {"gpus": lay.gpus, "dp": lay.dp, "tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "zero": lay.zero,
                           "sequence_parallel": lay.sequence_parallel},
                "high_precision": self.high_precision, "trainable_params": self.trainable, "cost": self.cost.as_dict(), "notes": self.notes}


def resolve(s: Setup) -> Setup:
    """QLoRA without a chosen quantization stores the base as NF4 with double quantization."""
    return replace(s, quant="nf4-dq") if s.finetune == "qlora" and s.quant == "none" else s


def setup_problems(s: Setup) -> list[str]:
    out = [choice_problem("mode", s.mode, MODES), choice_problem("policy", s.policy, POLICIES),
           choice_problem("optimizer", s.optimizer, OPTIMIZERS), choice_problem("recompute", s.recompute, RECOMPUTE),
           choice_problem("finetune", s.finetune, METHODS), choice_problem("quant", s.quant, WEIGHT_QUANTS),
           choice_problem("kv_quant", s.kv_quant, KV_QUANTS), int_problem("micro_batch", s.micro_batch),
           int_problem("micro_batches", s.micro_batches), int_problem("seq", s.seq)]
    out += [f"quantize_also: {k!r} is not one of {', '.join(KEEP_CHOICES)}" for k in s.quantize_also
            if k not in KEEP_CHOICES]
    if s.finetune != "full":
        out += target_problems(s.lora_targets, s.lora_rank)
    if s.mode == "train" and s.finetune == "full" and s.quant != "none":
        out.append(f"quant: {s.quant} weights cannot be trained in full; use finetune lora/qlora or quant none")
    return [p for p in out if p]


def plan(cfg: ModelConfig, gpu: str, layout: Layout, setup: Setup, tokens: int | None = None, mfu: float = 0.4,
         price: float = 2.0) -> Plan:
    """Per-GPU memory, fit and cost; ValueError naming each impossible field."""
    setup = resolve(setup)
    require(choice_problem("gpu", gpu, GPUS), *layout_problems(cfg, layout), *setup_problems(setup),
            number_problem("mfu", mfu, 0, strict=True) or (None if mfu <= 1 else f"mfu: {mfu} is more than 1"),
            number_problem("price", price), None if tokens is None else int_problem("tokens", tokens))
    dev: DeviceProfile = DEVICE_PROFILES[GPUS[gpu]]
    stages = [gpu_memory(cfg, layout, setup, s) for s in range(layout.pp)]
    worst = max(stages, key=lambda m: m["total"])
    one = Layout()
    whole = gpu_memory(cfg, one, replace(setup, mode="infer"))
    c = cost(cfg, dev, layout.gpus, layout.tp, setup.seq, setup.micro_batch, tokens, mfu, price,
             whole["weights"], whole["kv_cache"], POLICY_DTYPE[setup.policy], setup.finetune != "full")
    kept = ["norms", "biases"] + [k for k in KEEP_CHOICES if k not in setup.quantize_also]
    high = [] if setup.quant == "none" else [f"{k} ({high_dtype(setup.policy)})" for k in kept]
    notes = []
    if setup.finetune != "full" and setup.mode == "train":
        notes.append("activations: the full-training estimate (frozen matrices still pass gradients through)")
    return Plan(per_gpu=worst, per_stage=stages, memory_bytes=dev.memory_bytes,
                fits=worst["total"] <= dev.memory_bytes, margin_bytes=dev.memory_bytes - worst["total"],
                layout=layout, setup=setup, high_precision=high, cost=c, notes=notes,
                trainable=(count_params(cfg).total if setup.finetune == "full"
                           else lora_trainable(cfg, setup.lora_rank, setup.lora_targets)))


def smallest_layout(cfg: ModelConfig, gpu: str, setup: Setup, max_gpus: int = 64) -> Plan | None:
    """The fitting layout with the fewest GPUs (then the least memory per GPU), over power-of-two GPU counts,
    tp in 1, 2, 4, 8, pp dividing into the layers, ZeRO 0-3; None when nothing up to `max_gpus` fits."""
    n = 1
    while n <= max_gpus:
        best = None
        for tp in (1, 2, 4, 8):
            for pp in (1, 2, 4, 8, 16):
                for zero in (0, 1, 2, 3):
                    lay = Layout(n, tp, pp, zero)
                    if layout_problems(cfg, lay) or (zero and lay.dp == 1):   # ZeRO over one rank is no ZeRO
                        continue
                    p = plan(cfg, gpu, lay, setup)
                    if p.fits and (best is None or p.per_gpu["total"] < best.per_gpu["total"]):
                        best = p
        if best:
            return best
        n *= 2
    return None


__all__ = ["COMPONENTS", "GPUS", "Layout", "MODES", "Plan", "Setup", "plan", "smallest_layout"]
