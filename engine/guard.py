"""Refuse, with the numbers, to build a model that would not fit, instead of crashing the process.

Before a real (non-meta) model is built, the closed-form estimate is compared with the memory free on the
target device: CUDA via torch.cuda.mem_get_info, CPU via /proc/meminfo MemAvailable. Every path that builds or
runs a model asks here first (CLI train / bench / --measure / import-hf --check; the app's Measure, Activations,
Latency and Training), and the estimate is an upper bound of the path's peak: the saved tensors of the budget
plus the temporaries that live only inside one op (tests/test_guard_peak.py holds it against the CPU
allocator's measured peak).
"""
from __future__ import annotations

import os

import torch

from engine.budget.memory import memory_budget, output_logits_bytes, pure_policy
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.runtime import DTYPE_BYTES, dtype_name
from engine.units import fmt_bytes
from engine.validation import choice_problem, require

HEADROOM = 0.9      # use at most this share of the free memory


class MemoryRefusal(Exception):
    """The estimate exceeds the free memory; the message states both numbers."""

    def __init__(self, message: str, estimate: int, free: int):
        super().__init__(message)
        self.estimate, self.free = estimate, free


def free_bytes(device: str | torch.device) -> int:
    """Bytes free for a new allocation on `device`."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.mem_get_info(dev)[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def largest_tensor(cfg: ModelConfig, batch: int, seq: int) -> tuple[str, int]:
    """(what, elements) of the biggest single tensor a forward pass creates: a weight matrix, the logits, the
    attention scores of one layer or the FFN hidden activations."""
    d, N = cfg.d_model, batch * seq
    sizes = {"token embedding (vocab_size x d_model)": cfg.vocab_size * d,
             "FFN weight (d_ff x d_model)": cfg.ffn_width * d,
             "attention weight (n_heads*head_dim x d_model)": cfg.attn_width * d,
             "logits (batch x seq x vocab_size)": N * cfg.vocab_size,
             "attention scores (batch x n_heads x seq x seq)": batch * cfg.n_heads * seq * seq,
             "FFN hidden (batch x seq x d_ff)": N * cfg.ffn_width}
    what = max(sizes, key=sizes.get)
    return what, sizes[what]


def check_addressable(cfg: ModelConfig, batch: int, seq: int) -> None:
    """Even the meta device cannot describe a tensor whose byte size overflows int64: refuse with the numbers."""
    what, n = largest_tensor(cfg, batch, seq)
    if n * 8 >= 2**63:
        raise MemoryRefusal(f"refusing to build {cfg.name}: its {what} would have {n:,} elements, more than torch "
                            f"can address (2^63 bytes); reduce the sizes", n * 8, 2**63)


def transient_bytes(cfg: ModelConfig, batch: int, seq: int, dtype: str, training: bool,
                    attention: str = "sdpa") -> int:
    """Temporaries beyond what the budget keeps, summed (each alone can be the peak's top):
    - attention on the explicit path (soft-cap, sinks, or dropout's math fallback): 3 fp32 B*H*T*T tensors alive at
      once (scores, capped/softmaxed scores, probabilities or their gradients); SDPA without them: the window
      mask T*T*e and the attention output;
    - the head: fp32 logits, their log-softmax (and soft-cap) and, training, their gradient: 3 * N*V*4;
    - one block's widest intermediates: q, k, v, output and the FFN hidden (x3 for gated), in `dtype`;
    - training: foreach AdamW and grad clipping work on lists of parameter-sized buffers: 2 * P * e."""
    e, N, T = DTYPE_BYTES[dtype], batch * seq, seq
    explicit = (attention == "explicit" or cfg.attn_softcap is not None or cfg.attn_sinks
                or (training and cfg.dropout > 0))
    scores = 3 * batch * cfg.n_heads * T * T * 4 if explicit else T * T * 4
    head = 3 * N * cfg.vocab_size * 4
    block = N * (2 * cfg.attn_width + 2 * cfg.kv_width + 3 * cfg.ffn_width + 2 * cfg.d_model) * e
    optimizer = 2 * count_params(cfg).total * e if training else 0
    return scores + head + block + optimizer


def needed_bytes(cfg: ModelConfig, batch: int, seq: int, dtype: str, training: bool, copies: int = 1,
                 attention: str = "sdpa", keep_probs: bool = False) -> int:
    """Training: weights, grads, AdamW state and activations in `dtype` (pure precision, no master copy).
    Inference: weights (x `copies` models), KV cache and the logits of the whole sequence. Both plus
    transient_bytes. keep_probs: every layer's fp32 attention probabilities are kept (the Activations page)."""
    kept = cfg.n_layers * batch * cfg.n_heads * seq * seq * 4 if keep_probs else 0
    extra = transient_bytes(cfg, batch, seq, dtype, training, attention)
    if training:
        return memory_budget(cfg, batch, seq, dtype, pure_policy(dtype),
                             attention=attention).train_total_bytes + extra + kept
    b = memory_budget(cfg, batch, seq, dtype)
    return copies * b.infer_total_bytes + output_logits_bytes(cfg, batch, seq, dtype) + extra + kept


def check_fits(cfg: ModelConfig, device: str | torch.device, batch: int, seq: int,
               dtype: str | torch.dtype = "fp32", training: bool = True, copies: int = 1,
               attention: str = "sdpa", keep_probs: bool = False) -> None:
    """Raise MemoryRefusal if the estimate exceeds HEADROOM of the free memory on `device`; meta always fits.
    `copies`: models held at once for inference (a parity check holds two and the checkpoint)."""
    dev = torch.device(device)
    check_addressable(cfg, batch, seq)
    if dev.type == "meta":
        return
    name = dtype_name(dtype)
    if name not in DTYPE_BYTES:
        require(choice_problem("dtype", dtype, DTYPE_BYTES))
    need = needed_bytes(cfg, batch, seq, name, training, copies, attention, keep_probs)
    free = free_bytes(dev)
    if need > HEADROOM * free:
        what = "a training step" if training else "an inference pass"
        raise MemoryRefusal(
            f"refusing to build {cfg.name} ({count_params(cfg).total:,} params) on {dev}: {what} at "
            f"batch={batch}, seq={seq} in {name} needs about {fmt_bytes(need)}, but only {fmt_bytes(free)} is "
            f"free ({int(HEADROOM * 100)}% usable = {fmt_bytes(HEADROOM * free)})", need, free)
