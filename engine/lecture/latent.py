"""'MLA: cache the latent, not the heads': KV-cache bytes per token under MHA, GQA, MQA and MLA (the latent cache a
DeepSeek model keeps, and the per-head keys and values it stands for) at the current config's layers, query heads
and head width, all from the exact closed form engine.budget.memory.kv_cache_bytes (held against the tensors of
a real decode step in tests/test_lecture_mla.py). Every layer attends over the whole context here: windows aside.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.budget.memory import DTYPE_BYTES, kv_cache_bytes
from engine.config import ModelConfig
from engine.layers.kv_heads import kv_head_choices


@dataclass(frozen=True)
class CacheKind:
    kind: str              # "MHA", "GQA-8", "MQA", "MLA latent", "MLA expanded"
    config: ModelConfig    # the config whose cache this is (cache: which of an MLA config's two caches)
    cache: str             # "latent" or "expanded" (only MLA tells them apart)
    per_token: int         # bytes per token, every layer, batch 1
    values: int            # numbers cached per token and layer: 2*kv_heads*head_dim, r + dr or H*(dqk + dv)
    vs_mha: float          # per_token / MHA's


@dataclass(frozen=True)
class LatentCache:
    n_layers: int
    n_heads: int
    head_dim: int          # the plain heads' width (MLA's v_head_dim for an MLA config)
    kv_lora_rank: int
    rope_dim: int          # qk_rope_head_dim: the shared rotary key
    dtype: str
    kinds: tuple[CacheKind, ...]
    tokens: tuple[int, ...]
    series: dict[str, tuple[int, ...]]    # kind -> cache bytes at each context length in `tokens`, batch 1

    @property
    def gqa_groups(self) -> float:
        """The GQA key/value head count whose cache equals MLA's latent: (r + dr) / (2 * head_dim)."""
        return (self.kv_lora_rank + self.rope_dim) / (2 * self.head_dim)


def mla_sizes(cfg: ModelConfig) -> tuple[int, int]:
    """(kv_lora_rank, qk_rope_head_dim) to compare with: an MLA config's own; otherwise DeepSeek-V2's choice
    relative to the head width d_h (arXiv 2405.04434, section 2.1.4): d_c = 4 d_h and d_h^R = d_h / 2, the
    rotary width rounded up to an even number (its dimensions rotate in pairs)."""
    if cfg.mla:
        return cfg.kv_lora_rank, cfg.qk_rope_head_dim
    half = max(2, cfg.head_width // 2)
    return 4 * cfg.head_width, half + half % 2


def latent_cache(cfg: ModelConfig, tokens: Sequence[int], dtype: str = "bf16", kv_lora_rank: int | None = None,
                 rope_dim: int | None = None) -> LatentCache:
    """The cache of `cfg`'s layers and query heads under each attention kind, per token and along `tokens`.
    MHA/GQA/MQA use heads of the config's head width (an MLA config's v_head_dim, as Budgets' siblings do);
    MLA caches kv_lora_rank + rope_dim numbers per token and layer, its expanded form H*(dqk + dv) with the
    non-rotary key part as wide as a value head. DeepSeek-V3 in bf16: 70,272 B/token latent, ~71x that expanded.
    A rank or rotary width MLA does not allow raises ConfigError naming the field."""
    r0, dr0 = mla_sizes(cfg)
    r, dr = kv_lora_rank or r0, rope_dim or dr0
    L, H = cfg.n_layers, cfg.n_heads
    hd = cfg.v_head_dim if cfg.mla else cfg.head_width
    nope = cfg.qk_nope_head_dim if cfg.mla else hd
    sizes = dict(n_layers=L, n_heads=H, d_model=cfg.d_model, context_length=cfg.context_length)
    plain = ModelConfig(name=f"{cfg.name} (plain)", head_dim=hd, position="none", **sizes)
    mla = ModelConfig(name=f"{cfg.name} (MLA)", position="rope", kv_lora_rank=r, qk_rope_head_dim=dr,
                      qk_nope_head_dim=nope, v_head_dim=hd, **sizes)
    own = None if cfg.mla else cfg.kv_heads   # the config's own GQA, when it has one
    chosen = [(kind, plain.replace(n_kv_heads=k), "latent") for kind, k in kv_head_choices(H, own).items()]
    chosen += [("MLA latent", mla, "latent"), ("MLA expanded", mla, "expanded")]
    mha = kv_cache_bytes(plain, 1, 1, dtype)
    kinds = []
    for kind, c, cache in chosen:
        per_token = kv_cache_bytes(c, 1, 1, dtype, cache)
        values = per_token // (L * DTYPE_BYTES[dtype])
        kinds.append(CacheKind(kind=kind, config=c, cache=cache, per_token=per_token, values=values,
                               vs_mha=per_token / mha))
    series = {k.kind: tuple(kv_cache_bytes(k.config, 1, t, dtype, k.cache) for t in tokens) for k in kinds}
    return LatentCache(n_layers=L, n_heads=H, head_dim=hd, kv_lora_rank=r, rope_dim=dr, dtype=dtype,
                       kinds=tuple(kinds), tokens=tuple(tokens), series=series)
