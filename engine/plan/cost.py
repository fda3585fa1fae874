"""Time and money: training a token budget on N GPUs, and inference prefill and decode speed.

Training compute C = flops_per_token * D, with flops_per_token = 3 * forward FLOPs per token of
engine/budget/flops.py (6N from the matrices plus the causal attention scores, "6ND with attention"); LoRA and
QLoRA take 2 * forward (forward + the input gradients through frozen matrices, no weight gradients; the
adapters' own FLOPs, r/d of a matrix's, are left out).
Time = C / (N_gpus * peak * MFU); cost = time in hours * N_gpus * price per GPU-hour (both MFU and price are the
caller's stated assumptions). Chinchilla (Hoffmann et al. 2022): compute-optimal D ~ 20 tokens per parameter.
Inference on the roofline (engine/budget/devices.py): prefill time = max(FLOPs / (N peak), bytes / (N bw));
one decode step reads every weight byte (quantized bytes when quantized) and the KV cache, and is memory-bound:
step time = max(FLOPs / (N peak), bytes / (tp * bw)) — pipeline stages take turns on one token, so only tensor
parallel ranks add bandwidth; decode tokens/s = batch / step time.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.budget.devices import DeviceProfile
from engine.budget.flops import decode_flops, flops_budget
from engine.budget.params import count_params
from engine.config import ModelConfig

CHINCHILLA_TOKENS_PER_PARAM = 20


@dataclass(frozen=True)
class Cost:
    flops_per_token: float
    train_tokens: int
    train_flops: float
    train_seconds: float
    train_cost: float             # in the price's currency
    chinchilla_tokens: int
    prefill_seconds: float
    decode_step_seconds: float
    decode_tokens_per_s: float
    formulas: dict[str, str]

    def as_dict(self) -> dict:
        return asdict(self)


def cost(cfg: ModelConfig, dev: DeviceProfile, gpus: int, tp: int, seq: int, batch: int, tokens: int | None,
         mfu: float, price: float, weight_bytes: int, kv_bytes: int, dtype: str = "bf16",
         frozen_base: bool = False) -> Cost:
    """`weight_bytes` and `kv_bytes`: the whole model's stored weights and KV cache at (batch, seq);
    `frozen_base`: LoRA/QLoRA (no weight gradients for the base)."""
    fwd = flops_budget(cfg, 1, seq, causal=True).forward_flops
    passes = 2 if frozen_base else 3
    per_token = passes * fwd / seq
    params = count_params(cfg).total
    chinchilla = CHINCHILLA_TOKENS_PER_PARAM * params
    D = chinchilla if tokens is None else tokens
    C = per_token * D
    peak, bw = dev.peak_flops[dtype], dev.mem_bandwidth
    seconds = C / (gpus * peak * mfu)
    prefill = max(batch * fwd / (gpus * peak), (weight_bytes + kv_bytes) / (gpus * bw))
    step = max(decode_flops(cfg, batch, seq) / (gpus * peak), (weight_bytes + kv_bytes) / (tp * bw))
    formulas = {
        "train_flops": f"{passes} * forward FLOPs/token ({per_token:,.0f}) * D={D:,} tokens",
        "train_seconds": f"C / ({gpus} GPUs * {peak:.4g} FLOP/s * MFU {mfu:g})",
        "train_cost": f"hours * {gpus} GPUs * {price:g} per GPU-hour",
        "chinchilla_tokens": f"{CHINCHILLA_TOKENS_PER_PARAM} * P={params:,}",
        "prefill_seconds": "max(B * forward FLOPs / (N * peak), (weights + KV) bytes / (N * bandwidth))",
        "decode_tokens_per_s": "B / max(decode FLOPs / (N * peak), (weights + KV) bytes / (tp * bandwidth))",
    }
    return Cost(flops_per_token=per_token, train_tokens=D, train_flops=C, train_seconds=seconds,
                train_cost=seconds / 3600 * gpus * price, chinchilla_tokens=chinchilla, prefill_seconds=prefill,
                decode_step_seconds=step, decode_tokens_per_s=batch / step, formulas=formulas)
