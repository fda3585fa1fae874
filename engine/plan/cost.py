"""Time and money of training a token budget on N GPUs.

Training compute C = flops_per_token * D, with flops_per_token = 3 * forward FLOPs per token of
engine/budget/flops.py (6N from the matrices plus the causal attention scores, "6ND with attention"); LoRA and
QLoRA take 2 * forward (forward + the input gradients through frozen matrices, no weight gradients; the
adapters' own FLOPs, r/d of a matrix's, are left out).
Time = C / (N_gpus * peak * MFU); cost = time in hours * N_gpus * price per GPU-hour, in the price's currency
(MFU, price and currency are the caller's stated assumptions).
D: the caller's token budget. Without one, full training (pre-training) takes the Chinchilla compute-optimal
point (Hoffmann et al. 2022: ~20 tokens per parameter); a fine-tune has no such default (its data decides), so
without a budget it is not priced.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.budget.devices import DeviceProfile
from engine.budget.flops import flops_budget
from engine.budget.params import count_params
from engine.config import ModelConfig

CHINCHILLA_TOKENS_PER_PARAM = 20


@dataclass(frozen=True)
class Cost:
    flops_per_token: float
    train_tokens: int | None        # None: a fine-tune without a token budget (not priced)
    token_budget: str               # "given", "chinchilla" or "none"
    train_flops: float | None
    train_seconds: float | None
    train_cost: float | None        # in `currency`
    currency: str
    chinchilla_tokens: int
    formulas: dict[str, str]

    def as_dict(self) -> dict:
        return asdict(self)


def cost(cfg: ModelConfig, dev: DeviceProfile, gpus: int, seq: int, tokens: int | None, mfu: float, price: float,
         dtype: str = "bf16", frozen_base: bool = False, currency: str = "USD") -> Cost:
    """`frozen_base`: LoRA/QLoRA (no weight gradients for the base, and no Chinchilla default)."""
    fwd = flops_budget(cfg, 1, seq, causal=True).forward_flops
    passes = 2 if frozen_base else 3
    per_token = passes * fwd / seq
    params = count_params(cfg).total
    chinchilla = CHINCHILLA_TOKENS_PER_PARAM * params
    budget = "given" if tokens is not None else "none" if frozen_base else "chinchilla"
    D = chinchilla if budget == "chinchilla" else tokens
    peak = dev.peak_flops[dtype]
    formulas = {"chinchilla_tokens": f"{CHINCHILLA_TOKENS_PER_PARAM} * P={params:,} (pre-training only)"}
    if D is None:
        return Cost(per_token, None, budget, None, None, None, currency, chinchilla, formulas)
    C = per_token * D
    seconds = C / (gpus * peak * mfu)
    formulas.update({
        "train_flops": f"{passes} * forward FLOPs/token ({fwd / seq:,.0f}) * D={D:,} tokens",
        "train_seconds": f"C / ({gpus} GPUs * {peak:.4g} FLOP/s * MFU {mfu:g})",
        "train_cost": f"hours * {gpus} GPUs * {price:g} {currency} per GPU-hour",
    })
    return Cost(per_token, D, budget, C, seconds, seconds / 3600 * gpus * price, currency, chinchilla, formulas)
