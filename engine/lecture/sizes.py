"""Size examples: KV cache under MHA/GQA/MQA, depth vs width at equal block parameters, microgpt's hand count."""
from __future__ import annotations

from dataclasses import dataclass

from engine.budget.memory import kv_cache_bytes
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.layers.kv_heads import kv_head_choices
from engine.model import build_model
from engine.presets import get_preset


@dataclass(frozen=True)
class KVVariant:
    kind: str           # "MHA", "GQA-8", "MQA"
    kv_heads: int
    bytes: int          # 2 * L * batch * tokens * kv_heads * head_dim * bytes_per_element
    vs_mha: float       # bytes / MHA bytes


def kv_cache_variants(n_layers: int = 32, tokens: int = 8192, n_heads: int = 32, head_dim: int = 128,
                      batch: int = 1, dtype: str = "bf16", kv_heads: tuple[int, ...] | None = None) -> list[KVVariant]:
    """The same 32 query heads with fewer key/value heads: L=32, 8192 tokens, 32 heads of 128, bf16 gives
    MHA 4 GiB, GQA-8 1 GiB, MQA 128 MiB (engine.budget.memory.kv_cache_bytes). kv_heads defaults to the
    alternatives every page shows (engine.layers.kv_heads.kv_head_choices)."""
    if kv_heads is None:
        kv_heads = tuple(kv_head_choices(n_heads).values())
    base = ModelConfig(name="kv-demo", n_layers=n_layers, n_heads=n_heads, head_dim=head_dim,
                       d_model=n_heads * head_dim, context_length=tokens, position="none")
    mha = kv_cache_bytes(base, batch, tokens, dtype)
    out = []
    for k in kv_heads:
        cfg = base.replace(n_kv_heads=k)
        b = kv_cache_bytes(cfg, batch, tokens, dtype)
        out.append(KVVariant(kind=cfg.attention_kind, kv_heads=cfg.kv_heads, bytes=b, vs_mha=b / mha))
    return out


@dataclass(frozen=True)
class Shape:
    n_layers: int
    d_model: int
    n_heads: int
    block_params: int       # L * per-layer params (bias-free, gain-free: 12 * L * D^2 for MHA + dense 4D FFN)
    embedding_params: int   # V * D: not part of the block count, so total counts differ
    total_params: int
    kv_cache_bytes: int     # at `tokens`, batch 1
    sequential_blocks: int  # blocks one token must pass through one after another


@dataclass(frozen=True)
class DepthWidth:
    shapes: tuple[Shape, Shape]
    block_ratio: float      # second / first
    kv_ratio: float
    depth_ratio: float


def _shape(n_layers: int, d_model: int, head_dim: int, vocab: int, tokens: int, dtype: str) -> Shape:
    cfg = ModelConfig(name=f"L{n_layers}-D{d_model}", vocab_size=vocab, context_length=tokens, d_model=d_model,
                      n_layers=n_layers, n_heads=max(1, d_model // head_dim), bias=False, norm_affine=False,
                      ffn="gelu", position="none")  # RoPE or none: no position table in the counts
    count = count_params(cfg)
    return Shape(n_layers=n_layers, d_model=d_model, n_heads=cfg.n_heads, block_params=n_layers * count.per_layer,
                 embedding_params=count.components["token_embedding"], total_params=count.total,
                 kv_cache_bytes=kv_cache_bytes(cfg, 1, tokens, dtype), sequential_blocks=n_layers)


def depth_vs_width(first: tuple[int, int] = (12, 768), second: tuple[int, int] = (48, 384), head_dim: int = 64,
                   vocab: int = 50257, tokens: int = 2048, dtype: str = "bf16") -> DepthWidth:
    """Two (n_layers, d_model) shapes with equal block parameters (12*L*D^2: 12*768^2*12 = 48*384^2*12) can
    still differ: the deep-narrow one needs 2x the KV cache (it scales with L*D) and 4x the sequential depth."""
    a = _shape(*first, head_dim, vocab, tokens, dtype)
    b = _shape(*second, head_dim, vocab, tokens, dtype)
    return DepthWidth(shapes=(a, b), block_ratio=b.block_params / a.block_params,
                      kv_ratio=b.kv_cache_bytes / a.kv_cache_bytes, depth_ratio=b.sequential_blocks / a.sequential_blocks)


@dataclass(frozen=True)
class MicroRow:
    name: str
    shape: str       # as written in the microgpt code: rows x columns
    count: int


@dataclass(frozen=True)
class MicroTable:
    rows: list[MicroRow]
    hand_total: int          # sum of the rows
    engine_total: int        # count_params(preset)
    built_total: int         # sum of numel over the meta-built model's parameters


def microgpt_table(vocab_size: int | None = None, d_model: int | None = None, n_layers: int | None = None,
                   context_length: int | None = None) -> MicroTable:
    """The chapter's hand count for the `microgpt` preset (vocab 28, d 16, context 16, 1 layer: 4,224), next to
    the engine's closed form and the built model; any size can be changed (None keeps the preset's).
    microgpt's norms have no parameters and it has no biases, so the matrices are the whole count."""
    sizes = dict(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, context_length=context_length)
    cfg = get_preset("microgpt").config.replace(**{k: v for k, v in sizes.items() if v is not None})
    V, T, d, L, f = cfg.vocab_size, cfg.context_length, cfg.d_model, cfg.n_layers, cfg.ffn_width
    rows = [MicroRow("wte", f"{V} x {d}", V * d), MicroRow("wpe", f"{T} x {d}", T * d),
            MicroRow("lm_head", f"{V} x {d}", V * d)]
    for i in range(L):
        rows += [MicroRow(f"layer{i}.attn_w{m}", f"{d} x {d}", d * d) for m in "qkvo"]
        rows += [MicroRow(f"layer{i}.mlp_fc1", f"{f} x {d}", f * d), MicroRow(f"layer{i}.mlp_fc2", f"{d} x {f}", d * f)]
    built = build_model(cfg, device="meta")
    return MicroTable(rows=rows, hand_total=sum(r.count for r in rows), engine_total=count_params(cfg).total,
                      built_total=sum(p.numel() for p in built.parameters()))
