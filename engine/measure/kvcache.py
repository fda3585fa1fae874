"""Cache bytes of a real decode step: prefill T-1 tokens into a KVCache, decode one more, sum the tensors (the
attention layers' keys and values, and the recurrent layers' state)."""
from __future__ import annotations

import torch

from engine.budget.memory import kv_cache_bytes, state_bytes
from engine.config import ModelConfig
from engine.guard import check_fits
from engine.measure import Measurement
from engine.model import KVCache, build_model
from engine.runtime import TORCH_DTYPES


@torch.no_grad()
def measure_kv_cache(cfg: ModelConfig, batch: int, tokens: int, dtype: str = "fp32", device: str = "cpu",
                     seed: int = 0, index_keys: str = "fp8") -> Measurement:
    """Cache bytes after `tokens` positions (window layers keep only their last `window` keys; sparse-attention
    layers their indexer keys too, in `index_keys` format; a recurrent layer its fixed state, as this engine
    holds it: vLLM's convention)."""
    check_fits(cfg, device, batch, tokens, dtype, training=False)
    model = build_model(cfg, device=device, dtype=TORCH_DTYPES[dtype], seed=seed).eval()
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg.vocab_size, (batch, tokens), generator=g).to(device)
    cache = KVCache(cfg.n_layers, index_keys)
    if tokens > 1:
        model(idx[:, :-1], cache)
    model(idx[:, -1:], cache)
    estimate = (kv_cache_bytes(cfg, batch, tokens, dtype, index_keys=index_keys)
                + sum(state_bytes(cfg, batch, dtype).values()))
    return Measurement("KV-cache bytes", estimate, cache.nbytes(),
                       f"KVCache.nbytes() after a decode step, {dtype} on {device}")
