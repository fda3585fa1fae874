"""DeepSeek Sparse Attention (DSA): a lightning indexer picks the keys MLA attends to (DeepSeek-V3.2, GLM-5).

Per query t and earlier key s the indexer scores I(t, s) = sum_h w(t, h) * ReLU(q(t, h) . k(s) / sqrt(D)), from
its own small projections: query heads q = W_qb c_q (c_q the MLA query latent, H heads of width D), one key
k = LayerNorm(W_k x) shared by every head, and per-head weights w = W_w x / sqrt(H). The first qk_rope_head_dim
dims of q and k rotate with the model's RoPE tables (halves for DeepSeek, adjacent pairs for GLM-5). Each
query keeps the index_topk best visible keys (all of them while fewer are visible) and MLA's softmax runs over
those alone, as transformers' DeepseekV32Attention / GlmMoeDsaAttention mask it. The indexer runs without
gradients (the top-k choice has none; DeepSeek trains it with a separate KL loss, not built here), so autograd
saves nothing of it. GLM-5.2 "shared" layers reuse the previous indexer layer's choice (indexer_types).

A decode cache holds one indexer key per token and layer: in the cache's dtype (as transformers does), or
as DeepSeek's kernels hold it, FP8 (e4m3) with one fp32 scale per block of 128 values: 128 + 4 = 132 bytes
at D = 128 (deepseek-ai/DeepSeek-V3.2-Exp inference/model.py, Indexer: k_cache float8_e4m3fn [.., D] and
k_scale_cache float32 [.., D // 128]). Below the module: the closed forms.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.init import init_linear, init_norm
from engine.layers.norm import LayerNorm
from engine.layers.position import apply_rope
from engine.validation import Knobs, declare, per_layer_problem, shown

if TYPE_CHECKING:   # engine.config assembles ModelConfig from this module's knobs
    from engine.config import ModelConfig
    from engine.layers.attention import LayerKV

KEY_EPS = 1e-6          # the indexer key's LayerNorm eps, fixed in DeepSeek's and transformers' code
FP8_MAX = 448.0         # largest finite float8_e4m3fn
SCALE_BLOCK = 128       # values sharing one fp32 scale in DeepSeek's FP8 key cache
INDEX_KEY_FORMATS = ("fp8", "dtype")   # how a cache holds the indexer keys


# ---- declared fields (engine/config.py assembles every family's into ModelConfig) ----------------------------
@dataclass(frozen=True)
class IndexerKnobs(Knobs):
    """DeepSeek Sparse Attention: a lightning indexer in front of MLA; index_topk null keeps dense MLA."""
    index_topk: int | None = declare(None, "attention", "DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): a small "
                                      "lightning indexer scores every earlier key and MLA attends only to this "
                                      "many of them, per query.", lo=1, null="dense MLA: every earlier key")
    index_n_heads: int = declare(64, "attention", "DSA: query heads of the lightning indexer (each scores with "
                                  "ReLU(q.k), weighted per token).", lo=1)
    index_head_dim: int = declare(128, "attention", "DSA: width of the indexer's query heads and of its one key "
                                   "per token (the key cached for it); the first qk_rope_head_dim dims rotate.",
                                   lo=2)
    index_rope_interleave: bool = declare(False, "attention", "DSA: the indexer's rotary dims rotate in adjacent "
                                           "pairs (GLM-5) instead of halves (DeepSeek-V3.2).")
    indexer_types: tuple[str, ...] | None = declare(None, "attention", "DSA: per layer, full runs its own indexer, "
                                                     "shared reuses the keys the previous indexer layer chose "
                                                     "(GLM-5.2's IndexShare).", choices=("full", "shared"),
                                                     null="every layer runs its own indexer")

    @property
    def sparse_attention(self) -> bool:
        return self.index_topk is not None

    def layer_indexer(self, i: int) -> bool:
        """Does layer i (0-based) run its own indexer?"""
        return self.index_topk is not None and (self.indexer_types is None or self.indexer_types[i] == "full")

    @property
    def indexer_layers(self) -> list[bool]:
        return [self.layer_indexer(i) for i in range(self.n_layers)]

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        """DSA sits on MLA with a query latent (the indexer's queries read it); its rotary part fits its heads;
        one indexer type per layer, the first attention layer running its own."""
        out = []
        if ok("indexer_types", "n_layers") and c.indexer_types is not None:
            if problem := per_layer_problem("indexer_types", c.indexer_types, c.n_layers):
                out.append(problem)
            else:   # the first layer with attention (an FFN-only layer has none) picks the keys the others reuse
                read = ok("layer_types") and len(c.layer_types or ()) in (0, c.n_layers)   # else reported there
                first = next((i for i in range(c.n_layers) if read and "attention" in c.layer_mixers(i)), 0)
                if c.indexer_types[first] != "full":
                    out.append(f"indexer_types: the first attention layer ({first + 1}) must be full (a shared "
                               f"layer reuses an earlier layer's choice)")
        if c.index_topk is None or not ok("index_topk"):
            return out
        if ok("kv_lora_rank") and c.kv_lora_rank is None:
            out.append("kv_lora_rank: sparse attention (index_topk set) selects keys for MLA; set kv_lora_rank")
        elif ok("q_lora_rank") and c.q_lora_rank is None:
            out.append("q_lora_rank: the lightning indexer's queries read MLA's query latent; set q_lora_rank")
        if ok("index_head_dim", "qk_rope_head_dim") and c.index_head_dim < c.qk_rope_head_dim:
            out.append(f"index_head_dim: {shown(c.index_head_dim)} is narrower than its rotary part "
                       f"qk_rope_head_dim={c.qk_rope_head_dim}")
        if ok("layer_types", "n_layers") and len(c.layer_types or ()) in (0, c.n_layers):
            mixed = next((i for i in range(c.n_layers) if set(c.layer_mixers(i)) - {"attention"}), None)
            if mixed is not None:   # the indexer's choice is handed to each mixer; a recurrent one has no keys
                out.append(f"layer_types: sparse attention (index_topk set) is modelled on attention layers only; "
                           f"layer {mixed + 1} is {c.layer_types[mixed]}")
        return out


@dataclass(frozen=True)
class IndexerLayout:
    """The indexer of one layer, for the block diagram (app/diagram_mla.py): its projections, the cached key
    per token and the top-k. tests/test_indexer.py holds it against the built module and a decode cache."""
    heads: int
    head_dim: int
    rope_dim: int
    topk: int
    query_latent: int       # q_lora_rank: the indexer's queries read MLA's query latent
    d_model: int
    interleave: bool
    own: bool               # False: a shared layer reusing the previous indexer layer's choice
    fp8_key_bytes: int      # bytes per token of the key in DeepSeek's FP8 cache (132 at D = 128)


def indexer_layout(cfg: ModelConfig, own: bool = True) -> IndexerLayout:
    return IndexerLayout(heads=cfg.index_n_heads, head_dim=cfg.index_head_dim, rope_dim=cfg.qk_rope_head_dim,
                         topk=cfg.index_topk, query_latent=cfg.q_lora_rank, d_model=cfg.d_model,
                         interleave=cfg.index_rope_interleave, own=own,
                         fp8_key_bytes=fp8_key_width(cfg.index_head_dim))


class Chosen:
    """The keys the last indexer layer kept (bool [B, T, S]), for the shared layers after it in one forward."""

    def __init__(self) -> None:
        self.keep: torch.Tensor | None = None


def fp8_key_width(d: int) -> int:
    """Bytes of one FP8 key of width d with its fp32 scales: d + 4 per block of up to 128 values."""
    return d + 4 * math.ceil(d / SCALE_BLOCK)


def to_fp8(k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys [..., D] -> float8_e4m3fn [..., D] and fp32 scales [..., ceil(D/128)]: per block of 128 values,
    max|k| / 448 rounded up to a power of two (DeepSeek's act_quant with its ue8m0 scale format)."""
    blocks = k.float().split(SCALE_BLOCK, dim=-1)
    amax = torch.stack([b.abs().amax(dim=-1) for b in blocks], dim=-1).clamp_min(1e-4)
    scale = torch.exp2(torch.ceil(torch.log2(amax / FP8_MAX)))
    q = torch.cat([b / scale[..., i:i + 1] for i, b in enumerate(blocks)], dim=-1)
    return q.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def from_fp8(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    widths = [b.shape[-1] for b in q.split(SCALE_BLOCK, dim=-1)]
    return (q.float() * scale.repeat_interleave(torch.tensor(widths, device=q.device), dim=-1,
                                                output_size=q.shape[-1])).to(dtype)


def cached_keys(cache: LayerKV, k: torch.Tensor) -> torch.Tensor:
    """Append this step's indexer keys [B, T, D] to the layer's cache and return every key [B, S, D] as the
    scores read them (FP8 keys dequantized: the indexer scores what the cache holds)."""
    if cache.index_format == "fp8":
        q, scale = to_fp8(k)
        if cache.index_keys is not None:
            q, scale = torch.cat([cache.index_keys, q], dim=1), torch.cat([cache.index_scales, scale], dim=1)
        cache.index_keys, cache.index_scales = q, scale
        return from_fp8(q, scale, k.dtype)
    if cache.index_keys is not None:
        k = torch.cat([cache.index_keys, k], dim=1)
    cache.index_keys = k
    return k


class LightningIndexer(nn.Module):
    ROLES = {"wq_b": ("index_q", "matrix"), "wk": ("index_k", "matrix"), "k_norm": ("index_k_norm", "norm"),
             "weights_proj": ("index_weights", "matrix")}   # roles of the parameters (engine/plan/tensors.py)

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.H, self.D, self.dr, self.topk = cfg.index_n_heads, cfg.index_head_dim, cfg.qk_rope_head_dim, \
            cfg.index_topk
        self.interleave = cfg.index_rope_interleave
        self.wq_b = nn.Linear(cfg.q_lora_rank, self.H * self.D, bias=False)   # queries from MLA's query latent
        self.wk = nn.Linear(cfg.d_model, self.D, bias=False)                  # one key per token
        self.k_norm = LayerNorm(self.D, KEY_EPS)
        self.weights_proj = nn.Linear(cfg.d_model, self.H, bias=False)        # how much each head counts

    def init_weights(self, std: float, generator: torch.Generator) -> None:
        for proj in (self.wq_b, self.wk, self.weights_proj):
            init_linear(proj, std, generator)
        init_norm(self.k_norm)

    def _rope(self, x: torch.Tensor, rope: tuple | None) -> torch.Tensor:
        """RoPE on the first dr dims of x [B, heads, T, D]; adjacent pairs are regrouped into halves first."""
        if rope is None:      # position none: nothing rotates, as in MLA
            return x
        if self.interleave:
            rot = x[..., :self.dr]
            x = torch.cat([rot[..., 0::2], rot[..., 1::2], x[..., self.dr:]], dim=-1)
        return apply_rope(x, *rope)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, q_latent: torch.Tensor, visible: torch.Tensor, rope: tuple,
                cache: LayerKV | None = None) -> torch.Tensor:
        """x [B, T, d_model], q_latent [B, T, q_lora_rank], visible bool [T, S] -> keep bool [B, T, S]: the
        index_topk visible keys of highest score (every visible key while at most index_topk are)."""
        B, T, _ = x.shape
        q = self._rope(self.wq_b(q_latent).view(B, T, self.H, self.D).transpose(1, 2), rope)   # [B, H, T, D]
        k = self._rope(self.k_norm(self.wk(x)).view(B, 1, T, self.D), rope).view(B, T, self.D)
        if cache is not None:
            k = cached_keys(cache, k)                                                     # [B, S, D]
        scores = F.relu(q.transpose(1, 2).float() @ k.transpose(-1, -2).float().unsqueeze(1) * self.D ** -0.5)
        weights = self.weights_proj(x).float() * self.H ** -0.5                          # [B, T, H]
        index = (weights.unsqueeze(-2) @ scores).squeeze(-2).masked_fill(~visible, -math.inf)   # [B, T, S]
        top = index.topk(min(self.topk, index.shape[-1]), dim=-1).indices
        return torch.zeros_like(index, dtype=torch.bool).scatter(-1, top, True) & visible


# Closed forms of one indexer. d = d_model, rq = q_lora_rank, H = index_n_heads, D = index_head_dim, k = index_topk.

def indexer_params(cfg: ModelConfig) -> int:
    """wq_b rq*H*D, wk d*D, the key's LayerNorm 2*D (gain and shift), weights_proj d*H."""
    H, D = cfg.index_n_heads, cfg.index_head_dim
    return cfg.q_lora_rank * H * D + cfg.d_model * D + 2 * D + cfg.d_model * H


def indexer_matmul_params(cfg: ModelConfig) -> int:
    """Weights in the indexer's projections per token (2 FLOPs each): rq*H*D + d*D + d*H."""
    H, D = cfg.index_n_heads, cfg.index_head_dim
    return cfg.q_lora_rank * H * D + cfg.d_model * D + cfg.d_model * H


def index_score_flops(cfg: ModelConfig, batch: int, pairs: int) -> int:
    """Scoring `pairs` query-key pairs per sequence: q.k over H heads of width D and the weighted sum over heads,
    2*H*(D + 1) FLOPs a pair (the ReLU and the top-k are not matrix products)."""
    return 2 * cfg.index_n_heads * (cfg.index_head_dim + 1) * batch * pairs


def index_key_bytes(cfg: ModelConfig, batch: int, tokens: int, e: int, key_format: str) -> int:
    """One indexer layer's key cache after `tokens` positions (every one of them: the indexer scores the whole
    context): fp8 B*T*(D + 4*ceil(D/128)) (132 bytes a token at D = 128), dtype B*T*D*e."""
    width = fp8_key_width(cfg.index_head_dim) if key_format == "fp8" else cfg.index_head_dim * e
    return batch * tokens * width
