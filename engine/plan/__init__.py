"""Will it fit, and what will it cost: per-GPU memory under quantization, fine-tuning and parallelism, and what
an inference engine makes of the rest (longest context, concurrent requests, tokens/s).

plan(cfg, gpu, layout, setup) prices the worst GPU (every pipeline stage on data rank 0, which holds the largest
chunks) and says whether it fits; smallest_layout() searches the layouts that do. Modules: tensors (shapes),
quant (bytes under a scheme; ggml and gguf for llama.cpp's files), finetune (LoRA adapters), parallel (the slice a
GPU holds), memory (components), cost (training time and money), serve (vLLM blocks, llama.cpp cells, longest
context, concurrency), speed (decode and prefill on the roofline).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.budget.devices import DEVICE_PROFILES, GPUS, DeviceProfile
from engine.budget.params import count_params
from engine.budget.memory import OPTIMIZERS, POLICIES, RECOMPUTE, POLICY_DTYPE
from engine.config import ModelConfig
from engine.plan.cost import Cost, cost
from engine.plan.finetune import METHODS, lora_trainable, target_problems
from engine.plan.memory import COMPONENTS, Setup, gpu_memory, high_dtype
from engine.plan.parallel import TP_MIXER_NOTE, Layout, layout_problems, tp_whole_mixers
from engine.plan.quant import KEEP_CHOICES, KV_QUANTS, checkpoint_bytes, kept_high, quant_problem, weight_storage
from engine.plan.serve import Capacity, Serving, capacity, serving_problems
from engine.plan.speed import Speed, speed
from engine.plan.tensors import param_tensors
from engine.units import fmt_bytes
from engine.validation import choice_problem, int_problem, number_problem, require

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
    cost: Cost | None                     # training (None for inference)
    trainable: int                        # trainable parameters (all of them, or the LoRA adapters)
    weights_by_storage: dict[str, int]    # the whole model's weight bytes by what they are stored as
    capacity: Capacity | None = None      # inference: the engine's KV pool, longest context, concurrency
    speed: Speed | None = None            # inference: decode tokens/s at the batch and context, prefill time
    cost_per_million: float | None = None # inference: price of a million generated tokens at that batch
    currency: str = "USD"
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        lay = self.layout
        suffixed = lambda m: {f"{k}_bytes": v for k, v in m.items()}   # noqa: E731  (the CLI's one vocabulary)
        serving = self.capacity.as_dict() if self.capacity else None
        return {"per_gpu": suffixed(self.per_gpu), "fits": self.fits, "margin_bytes": self.margin_bytes,
                "memory_bytes": self.memory_bytes, "per_stage": [suffixed(m) for m in self.per_stage],
                "layout": {"gpus": lay.gpus, "dp": lay.dp, "tp": lay.tp, "pp": lay.pp, "ep": lay.ep,
                           "zero": lay.zero, "sequence_parallel": lay.sequence_parallel},
                "high_precision": self.high_precision, "weights_by_storage": self.weights_by_storage,
                "trainable_params": self.trainable, "cost": self.cost.as_dict() if self.cost else None,
                "cost_per_million_tokens": self.cost_per_million, "currency": self.currency,
                "max_context": serving and serving["max_context"],
                "max_concurrency": serving and serving["max_concurrency"],
                "serving": serving, "speed": self.speed.as_dict() if self.speed else None, "notes": self.notes}


def resolve(s: Setup) -> Setup:
    """QLoRA without a chosen quantization stores the base as NF4 with double quantization."""
    return replace(s, quant="nf4-dq") if s.finetune == "qlora" and s.quant == "none" else s


def setup_problems(s: Setup) -> list[str]:
    out = [choice_problem("mode", s.mode, MODES), choice_problem("policy", s.policy, POLICIES),
           choice_problem("optimizer", s.optimizer, OPTIMIZERS), choice_problem("recompute", s.recompute, RECOMPUTE),
           choice_problem("finetune", s.finetune, METHODS), quant_problem(s.quant),
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
         price: float = 2.0, currency: str = "USD", serving: Serving = Serving(), request_tokens: int | None = None,
         efficiency: float = 0.75, compute_efficiency: float = 0.5) -> Plan:
    """Per-GPU memory, fit, training cost and (inference) the serving answers; ValueError naming each impossible
    field. `tokens`: the training budget; `request_tokens`: N of "concurrent requests of N tokens"."""
    setup = resolve(setup)
    def share(name: str, v: float) -> str | None:
        return number_problem(name, v, 0, strict=True) or (None if v <= 1 else f"{name}: {v} is more than 1")
    require(choice_problem("gpu", gpu, GPUS), *layout_problems(cfg, layout), *setup_problems(setup),
            share("mfu", mfu), share("efficiency", efficiency), share("compute_efficiency", compute_efficiency),
            number_problem("price", price), None if tokens is None else int_problem("tokens", tokens),
            None if request_tokens is None else int_problem("request_tokens", request_tokens),
            *serving_problems(serving))
    dev: DeviceProfile = DEVICE_PROFILES[GPUS[gpu]]
    stages = [gpu_memory(cfg, layout, setup, s) for s in range(layout.pp)]
    worst = max(stages, key=lambda m: m["total"])
    infer = setup.mode == "infer"
    c = None if infer else cost(cfg, dev, layout.gpus, setup.seq, tokens, mfu, price, POLICY_DTYPE[setup.policy],
                                setup.finetune != "full", currency)
    plain = setup.quant not in ("none", "checkpoint") and not setup.quant.startswith("gguf:")
    high = [f"{k} ({high_dtype(setup.policy)})" for k in kept_high(cfg, setup.quantize_also)] if plain else []
    notes = [TP_MIXER_NOTE] if layout.tp > 1 and tp_whole_mixers(cfg) else []
    if setup.finetune != "full" and setup.mode == "train":
        notes.append("activations: the full-training estimate (frozen matrices still pass gradients through)")
    notes += shipped_notes(cfg, setup)
    if c is not None and c.train_tokens is None:
        notes.append("training time and cost: give a token budget (a fine-tune has no compute-optimal default; "
                     "Chinchilla's 20 tokens per parameter is for pre-training)")
    sp = speed(cfg, dev, layout, setup, setup.micro_batch, setup.seq, efficiency, compute_efficiency) if infer \
        else None
    return Plan(per_gpu=worst, per_stage=stages, memory_bytes=dev.memory_bytes,
                fits=worst["total"] <= dev.memory_bytes, margin_bytes=dev.memory_bytes - worst["total"],
                layout=layout, setup=setup, high_precision=high, cost=c, notes=notes,
                weights_by_storage=weights_by_storage(cfg, setup),
                capacity=capacity(cfg, dev.memory_bytes, layout, setup, serving, request_tokens) if infer else None,
                speed=sp, cost_per_million=sp and layout.gpus * price / (sp.total * 3600) * 1e6, currency=currency,
                trainable=(count_params(cfg).total if setup.finetune == "full"
                           else lora_trainable(cfg, setup.lora_rank, setup.lora_targets)))


def shipped_notes(cfg: ModelConfig, s: Setup) -> list[str]:
    """What the published checkpoint is, when the config says (ckpt_format), beside the chosen storage."""
    if cfg.ckpt_format == "none":
        return []
    model, mtp = checkpoint_bytes(cfg)
    extra = (f"; the files also hold {cfg.mtp_depth} multi-token-prediction module(s), {fmt_bytes(mtp)}, loaded "
             f"only for speculative decoding ({fmt_bytes(model + mtp)} in all)") if mtp else ""
    if s.quant == "checkpoint":
        return [f"{cfg.name} as published: {cfg.ckpt_format}, {fmt_bytes(model)} of weights{extra}"]
    return [f"{cfg.name} ships in {cfg.ckpt_format} ({fmt_bytes(model)} of weights{extra}); weight storage "
            f"'checkpoint' sizes it as published"]


def weights_by_storage(cfg: ModelConfig, s: Setup) -> dict[str, int]:
    """The whole model's weight bytes grouped by storage (bf16, int4-g128, Q4_K, F32, ...), largest first."""
    store = weight_storage(cfg, s.quant, high_dtype(s.policy), s.quantize_also)
    out: dict[str, int] = {}
    for t in param_tensors(cfg):
        b, kind = store(t, t.shape)
        out[kind] = out.get(kind, 0) + b
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def smallest_layout(cfg: ModelConfig, gpu: str, setup: Setup, max_gpus: int = 64) -> Plan | None:
    """The fitting layout with the fewest GPUs (then the least memory per GPU), over power-of-two GPU counts,
    tp in 1, 2, 4, 8, pp dividing into the layers, ZeRO 0-3 (on a tie the smaller tp, then pp, then ZeRO stage:
    sharding that lowers no binding GPU is not asked for); None when nothing up to `max_gpus` fits."""
    require(choice_problem("gpu", gpu, GPUS), *setup_problems(resolve(setup)))
    memory = DEVICE_PROFILES[GPUS[gpu]].memory_bytes
    n = 1
    while n <= max_gpus:
        best = None
        for tp in (1, 2, 4, 8):
            for pp in (1, 2, 4, 8, 16):
                for zero in (0, 1, 2, 3):
                    lay = Layout(n, tp, pp, zero)
                    if layout_problems(cfg, lay) or (zero and lay.dp == 1):   # ZeRO over one rank is no ZeRO
                        continue
                    total = max(gpu_memory(cfg, lay, resolve(setup), st)["total"] for st in range(pp))
                    if total <= memory and (best is None or total < best[0]):
                        best = (total, lay)
        if best:
            return plan(cfg, gpu, best[1], setup)
        n *= 2
    return None


__all__ = ["COMPONENTS", "GPUS", "Layout", "MODES", "Plan", "Serving", "Setup", "plan", "shipped_notes",
           "smallest_layout"]
