"""Decode and prefill speed on the roofline, with the share of the datasheet peak that is really reached stated.

Decode (one new token for each of B sequences that hold T tokens) is memory-bound at small B: every step reads
the weights the step uses and the KV cache once.
  weight bytes   dense: all of them (in their stored, quantized bytes). MoE: everything but the routed experts,
                 plus the experts the batch routes to: with k of E experts per token and routing assumed uniform
                 and independent, a layer reads E * (1 - (1 - k/E)^B) distinct experts, k at B = 1 (not all E)
  KV bytes       the cache of B sequences of T tokens (engine/plan/memory.py kv_cache_per_gpu, whole model)
  step time      max(decode FLOPs / (tp * peak * compute efficiency),
                     (weight + KV bytes) / (tp * bandwidth * bandwidth efficiency))
                 pipeline stages take turns on one token, so only tensor-parallel ranks add bandwidth
  tokens/s       per user 1 / step; all users B / step
Prefill (B prompts of T tokens at once) is compute-bound: max(FLOPs / (N * peak * compute efficiency),
(weights + KV written) / (N * bandwidth * bandwidth efficiency)) over all N GPUs.
Efficiencies are assumptions the caller states (defaults 0.75 of bandwidth: a measured Llama-3.1-8B bf16 decode
at batch 1 on an A100 40GB reached about 77% of its bandwidth ceiling; 0.5 of compute).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.budget.devices import DeviceProfile
from engine.budget.flops import decode_flops, flops_budget
from engine.config import ModelConfig
from engine.plan.memory import POLICY_DTYPE, Setup, high_dtype
from engine.plan.parallel import Layout
from engine.plan.quant import weight_storage
from engine.plan.serve import sequence_bytes
from engine.plan.tensors import EXPERTS, param_tensors


@dataclass(frozen=True)
class Speed:
    batch: int
    context: int
    weight_bytes: int           # read per decode step
    kv_bytes: int               # read per decode step
    flops: int                  # one decode step
    step_seconds: float
    per_user: float             # tokens/s each sequence sees
    total: float                # tokens/s over the batch
    bound: str                  # "memory" or "compute"
    experts_read: float | None  # MoE: distinct routed experts one layer reads per step
    prefill_seconds: float      # B prompts of `context` tokens
    formulas: dict[str, str]

    def as_dict(self) -> dict:
        return asdict(self)


def experts_read(cfg: ModelConfig, batch: int) -> float:
    """Expected distinct experts of an MoE layer that `batch` tokens route to (uniform, independent routing)."""
    e, k = cfg.n_experts, cfg.experts_per_token
    return e * (1 - (1 - k / e) ** batch)


def weight_bytes(cfg: ModelConfig, s: Setup) -> tuple[int, int]:
    """(stored bytes of everything but the routed experts, stored bytes of the routed experts)."""
    store = weight_storage(cfg, s.quant, high_dtype(s.policy), s.quantize_also)
    dense = experts = 0
    for t in param_tensors(cfg):
        if t.role.removesuffix("_bias") in EXPERTS:
            experts += store(t, t.shape)[0]
        else:
            dense += store(t, t.shape)[0]
    return dense, experts


def speed(cfg: ModelConfig, dev: DeviceProfile, lay: Layout, s: Setup, batch: int, context: int,
          efficiency: float = 0.75, compute_efficiency: float = 0.5) -> Speed:
    """Decode tokens/s of `batch` sequences at `context` tokens, and the prefill time of their prompts."""
    dtype = POLICY_DTYPE[s.policy]
    peak, bw = dev.peak_flops[dtype], dev.mem_bandwidth
    dense, experts = weight_bytes(cfg, s)
    used = experts_read(cfg, batch) if cfg.n_experts else None
    w = dense + (round(experts * used / cfg.n_experts) if used is not None else 0)
    kv = sequence_bytes(cfg, Layout(), s, context, batch)          # every layer's cache, whole model
    flops = decode_flops(cfg, batch, context)
    compute_t = flops / (lay.tp * peak * compute_efficiency)
    memory_t = (w + kv) / (lay.tp * bw * efficiency)
    step = max(compute_t, memory_t)
    pre_flops = batch * flops_budget(cfg, 1, context, causal=True).forward_flops
    prefill = max(pre_flops / (lay.gpus * peak * compute_efficiency),
                  (dense + experts + kv) / (lay.gpus * bw * efficiency))
    reads = (f"weights {w:,} B" + (f" (dense part + {used:.2f} of {cfg.n_experts} experts per MoE layer at batch "
                                   f"{batch})" if used is not None else "") + f" + KV {kv:,} B")
    formulas = {
        "step_seconds": (f"max({flops:,} FLOPs / (tp {lay.tp} x {peak:.4g} FLOP/s x {compute_efficiency:g}), "
                         f"({reads}) / (tp {lay.tp} x {bw:.4g} B/s x {efficiency:g}))"),
        "per_user": "1 / step_seconds", "total": f"batch {batch} / step_seconds",
        "prefill_seconds": (f"max({pre_flops:,} FLOPs / ({lay.gpus} GPUs x peak x {compute_efficiency:g}), "
                            f"(weights + KV) / ({lay.gpus} GPUs x bandwidth x {efficiency:g}))"),
    }
    return Speed(batch=batch, context=context, weight_bytes=w, kv_bytes=kv, flops=flops, step_seconds=step,
                 per_user=1 / step, total=batch / step, bound="compute" if compute_t >= memory_t else "memory",
                 experts_read=used, prefill_seconds=prefill, formulas=formulas)
