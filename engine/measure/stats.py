"""Live statistics of a built model on a sample input: what the residual stream and attention actually do.

- residual RMS per layer: sqrt(mean(x^2)) of the residual stream after the embeddings and after every block;
- attention entropy per head: -sum_j p_ij log p_ij (nats) averaged over query positions, next to log(keys
  visible), the entropy of uniform attention over the same keys;
- attention maps [layer, head, query, key] from the explicit attention path (keep_probs=True).
The input is seeded random token ids; weights are the model's seeded initialisation (untrained).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.guard import MemoryRefusal, check_fits
from engine.layers.span import keys_seen
from engine.model import build_model
from engine.runtime import default_device
from engine.units import fmt_bytes
from engine.validation import int_problem, require

# Building and initialising a model costs about a second per 100M parameters on a laptop CPU.
CPU_PARAM_LIMIT = 200_000_000


class StatsRefusal(Exception):
    """The config is too big to build for live statistics on this device; the message gives the numbers."""


@dataclass(frozen=True)
class ModelStats:
    tokens: int
    device: str
    residual_rms: list[float]         # index 0: after embeddings; index i: after block i
    entropy: list[list[float]]        # [attention layer][head], nats, mean over query positions
    uniform_entropy: list[float]      # [attention layer]: mean over queries of log(visible keys)
    probs: torch.Tensor               # [attention layer, head, query, key] float32 on CPU, batch element 0


def check_live(cfg: ModelConfig, device: str, tokens: int = 64) -> None:
    """Refuse configs too big to build on CPU in a few seconds (a GPU takes any size that fits in memory),
    and, through engine.guard, whatever would not fit on `device`: one sequence of `tokens` on the explicit
    path, every layer's attention probabilities kept."""
    total = count_params(cfg).total
    if torch.device(device).type == "cpu" and total > CPU_PARAM_LIMIT:
        raise StatsRefusal(f"{cfg.name} has {total:,} parameters; building a real model on CPU is limited to "
                           f"{CPU_PARAM_LIMIT:,} here (it would hold {fmt_bytes(4 * total)} of fp32 weights and "
                           f"take minutes to initialise). Use a GPU, or fewer layers / a smaller d_model.")
    try:
        check_fits(cfg, device, 1, max(1, min(tokens, cfg.context_length)), "fp32", training=False,
                   attention="explicit", keep_probs=True)
    except MemoryRefusal as e:
        raise StatsRefusal(str(e)) from None


@torch.no_grad()
def model_stats(cfg: ModelConfig, tokens: int = 64, seed: int = 0, device: str | None = None) -> ModelStats:
    """Build `cfg` (fp32, seeded), run one batch of `tokens` random ids, and collect the statistics."""
    device = device or default_device()
    check_live(cfg, device, tokens)
    T = min(tokens, cfg.context_length)
    if T < 1:
        require(int_problem("tokens", tokens))
    model = build_model(cfg, device=device, seed=seed).eval()
    model.set_attention("explicit", keep_probs=True)
    rms: list[float] = []

    def record(_module, _inputs, out):
        rms.append(float(out.float().pow(2).mean().sqrt()))

    hooks = [b.register_forward_hook(record) for b in model.blocks]
    pre = model.blocks[0].register_forward_pre_hook(lambda _m, args: record(None, None, args[0]))
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg.vocab_size, (1, T), generator=g).to(device)
    try:
        model(idx)
    finally:
        for h in hooks + [pre]:
            h.remove()
    maps = [a.probs[0].float().cpu() for a in model.attention_layers()]   # attention layers only (hybrids)
    probs = torch.stack(maps) if maps else torch.zeros(0, cfg.n_heads, T, T)            # [L, H, T, T]
    ent = -(probs * torch.log(probs.clamp_min(1e-30))).sum(-1).mean(-1)                 # [L, H]
    uniform = [float(torch.tensor([math.log(keys_seen(i, w)) for i in range(T)]).mean())
               for w in (spec.window for spec in cfg.layer_specs if spec.attention)]   # one per attention layer
    return ModelStats(T, str(device), rms, ent.tolist(), uniform, probs)
