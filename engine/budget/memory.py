"""Memory budget of one training step and of inference: every term with the formula that produced it.

P = unique parameters (count_params), B = batch, T = sequence, e = bytes per element of `dtype`.
Training state (bytes per parameter, by precision policy; optimizer states: AdamW 2, SGD-momentum 1, SGD 0):
  policy       weights  grads  master  each optimizer state
  fp32            4       4      0       4
  bf16            2       2      0       2
  mixed-bf16      2       2      4       4      (AdamW: 2 + 2 + 4 + 8 = 16 bytes/param)
  mixed-fp16      2       2      4       4
Activations (what autograd saves for forward + cross-entropy) and the KV cache use `dtype`; see
engine/budget/activations.py for the per-op derivation. KV cache = 2 * sum over layers of min(T, window_l) * B *
kv_heads * head_dim * e (each layer's term: engine/layers/attention.py kv_bytes); MLA holds its latent and rotary
key instead (engine/layers/mla.py), and with sparse attention each indexer layer its indexer key per token too
(engine/layers/indexer.py: FP8 with its scales, 132 B a token at width 128, or in the cache dtype).
Inference total = P * e + KV cache at B, T.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from engine.budget.activations import activation_estimate
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.layers.attention import ATTENTION_IMPLS, kv_bytes
from engine.layers.indexer import INDEX_KEY_FORMATS, index_key_bytes
from engine.layers.mla import mla_kv_bytes
from engine.runtime import DTYPE_BYTES
from engine.validation import choice_problem, require, size_problems

POLICIES = ("fp32", "bf16", "mixed-bf16", "mixed-fp16")
OPTIMIZERS = ("adamw", "sgd-momentum", "sgd")
RECOMPUTE = ("none", "selective", "full")

# policy -> the dtype its activations and KV cache are held in (the low-precision compute dtype)
POLICY_DTYPE = {"fp32": "fp32", "bf16": "bf16", "mixed-bf16": "bf16", "mixed-fp16": "fp16"}
# policy -> (weight bytes, grad bytes, master-copy bytes, bytes per optimizer state) per parameter
_POLICY_BYTES = {"fp32": (4, 4, 0, 4), "bf16": (2, 2, 0, 2), "mixed-bf16": (2, 2, 4, 4), "mixed-fp16": (2, 2, 4, 4)}
_OPTIMIZER_STATES = {"adamw": 2, "sgd-momentum": 1, "sgd": 0}
_STATE_NAMES = {"adamw": "first and second moments", "sgd-momentum": "momentum buffer", "sgd": "no state"}


@dataclass(frozen=True)
class MemoryBudget:
    weights_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    master_bytes: int
    activations_bytes: int
    kv_cache_bytes: int
    train_total_bytes: int
    infer_total_bytes: int
    activations_per_layer: list[int]     # saved bytes of each block (recompute applied)
    logits_bytes: int                    # final norm, head input, (soft-capped) log-probs, targets
    embedding_bytes: int                 # token ids, embedding norm/dropout, rotary tables
    formulas: dict[str, str] = field(default_factory=dict)
    kv_cache_expanded_bytes: int | None = None   # MLA: the per-head K/V a plain cache would hold instead
    kv_cache_index_bytes: int | None = None      # sparse attention: the indexer keys' part of kv_cache_bytes

    def as_dict(self) -> dict:
        return asdict(self)


def output_logits_bytes(cfg: ModelConfig, batch: int, seq: int, dtype: str) -> int:
    """The [B, T, V] logits a forward pass returns, in `dtype` (inference keeps them; no autograd)."""
    return batch * seq * cfg.vocab_size * DTYPE_BYTES[dtype]


def pure_policy(dtype: str) -> str:
    """The policy of a plain `model.to(dtype)` run: weights, grads and optimizer state all in `dtype`, no fp32
    master copy (fp16 has the same byte counts as bf16)."""
    return "fp32" if dtype == "fp32" else "bf16"


def kv_cache_bytes(cfg: ModelConfig, batch: int, tokens: int, dtype: str = "bf16", kind: str = "latent",
                   index_keys: str = "fp8") -> int:
    """Keys and values of every layer after `tokens` positions; window layers hold only the last `window`.
    MLA holds the latent and the shared rotary key (kind "latent") or, for comparison, the expanded per-head
    keys and values (kind "expanded"); with sparse attention, plus index_key_cache_bytes."""
    require(choice_problem("dtype", dtype, DTYPE_BYTES), *size_problems(batch, tokens))
    if cfg.mla:
        return (cfg.n_layers * mla_kv_bytes(cfg, batch, tokens, DTYPE_BYTES[dtype], kind)
                + index_key_cache_bytes(cfg, batch, tokens, dtype, index_keys))
    return sum(kv_bytes(cfg, batch, tokens, w, DTYPE_BYTES[dtype]) for w in cfg.layer_windows)


def index_key_cache_bytes(cfg: ModelConfig, batch: int, tokens: int, dtype: str = "bf16",
                          index_keys: str = "fp8") -> int:
    """Sparse attention's indexer keys, every token of every layer running an indexer: "fp8" as DeepSeek's
    kernels hold them (132 B a token at width 128), "dtype" in the cache's dtype (as transformers holds them);
    0 without sparse attention."""
    require(choice_problem("dtype", dtype, DTYPE_BYTES), choice_problem("index_keys", index_keys, INDEX_KEY_FORMATS),
            *size_problems(batch, tokens))
    if not (cfg.mla and cfg.sparse_attention):
        return 0
    return sum(cfg.indexer_layers) * index_key_bytes(cfg, batch, tokens, DTYPE_BYTES[dtype], index_keys)


def _index_formula(cfg: ModelConfig, batch: int, tokens: int) -> str:
    return (f"{sum(cfg.indexer_layers)} indexer layers * T={tokens} * B={batch} * (index_head_dim="
            f"{cfg.index_head_dim} FP8 bytes + 4 B fp32 scale per 128 of them) (the lightning indexer's key per "
            f"token, as DeepSeek's kernels cache it)")


def _kv_formula(cfg: ModelConfig, batch: int, tokens: int, e: int) -> str:
    if cfg.mla:
        index = f" + {_index_formula(cfg, batch, tokens)}" if cfg.sparse_attention else ""
        return (f"L={cfg.n_layers} * T={tokens} * B={batch} * (kv_lora_rank={cfg.kv_lora_rank} + "
                f"qk_rope_head_dim={cfg.qk_rope_head_dim}) * {e} B (MLA caches the latent and one shared "
                f"rotary key per token){index}")
    windows = cfg.layer_windows
    local = sum(w is not None for w in windows)
    held = (f"{len(windows) - local}*{tokens} + {local}*min({tokens}, {cfg.attn_window})" if local
            else f"{len(windows)}*{tokens}")
    return (f"2 (K and V) * ({held}) layer-tokens * B={batch} * kv_heads={cfg.kv_heads} * "
            f"head_dim={cfg.head_width} * {e} B")


def memory_budget(cfg: ModelConfig, batch: int, seq: int, dtype: str = "bf16", policy: str = "mixed-bf16",
                  optimizer: str = "adamw", recompute: str = "none", attention: str = "sdpa") -> MemoryBudget:
    """All memory terms for training at (batch, seq) and for inference holding a KV cache of seq tokens."""
    require(choice_problem("dtype", dtype, DTYPE_BYTES), choice_problem("policy", policy, POLICIES),
            choice_problem("optimizer", optimizer, OPTIMIZERS), choice_problem("recompute", recompute, RECOMPUTE),
            choice_problem("attention", attention, ATTENTION_IMPLS), *size_problems(batch, seq))
    P = count_params(cfg).total
    e = DTYPE_BYTES[dtype]
    wb, gb, mb, sb = _POLICY_BYTES[policy]
    states = _OPTIMIZER_STATES[optimizer]
    act = activation_estimate(cfg, batch, seq, dtype, attention, recompute)
    kv = kv_cache_bytes(cfg, batch, seq, dtype)
    weights, grads, master, opt = P * wb, P * gb, P * mb, P * states * sb
    train = weights + grads + opt + master + act.total
    infer = P * e + kv
    formulas = {
        "weights_bytes": f"P={P:,} params * {wb} B ({policy} weights)"
                         + (" (P is the total: every expert is stored, though a token uses only k)"
                            if cfg.n_experts is not None else ""),
        "grads_bytes": f"P * {gb} B (gradients in the weights' precision)",
        "optimizer_bytes": f"P * {states} states ({_STATE_NAMES[optimizer]}) * {sb} B",
        "master_bytes": (f"P * {mb} B (fp32 master copy of the low-precision weights)" if mb
                         else "0: the weights themselves are updated (no master copy)"),
        "activations_bytes": act.formula,
        "kv_cache_bytes": _kv_formula(cfg, batch, seq, e),
        "train_total_bytes": "weights + grads + optimizer + master + activations",
        "infer_total_bytes": f"P * {e} B ({dtype} weights) + KV cache at B={batch}, T={seq}",
    }
    expanded = kv_cache_bytes(cfg, batch, seq, dtype, "expanded") if cfg.mla else None
    index = index_key_cache_bytes(cfg, batch, seq, dtype) if cfg.mla and cfg.sparse_attention else None
    if cfg.mla:
        formulas["kv_cache_expanded_bytes"] = (
            f"L={cfg.n_layers} * T={seq} * B={batch} * n_heads={cfg.n_heads} * (qk_head_dim={cfg.qk_head_dim} "
            f"+ v_head_dim={cfg.v_head_dim}) * {e} B (per-head keys and values rebuilt from the latent)"
            + (" + the indexer keys" if index is not None else ""))
    if index is not None:
        formulas["kv_cache_index_bytes"] = _index_formula(cfg, batch, seq)
    return MemoryBudget(weights_bytes=weights, grads_bytes=grads, optimizer_bytes=opt, master_bytes=master,
                        activations_bytes=act.total, kv_cache_bytes=kv, train_total_bytes=train,
                        infer_total_bytes=infer, activations_per_layer=act.per_layer, logits_bytes=act.head,
                        embedding_bytes=act.embedding, formulas=formulas, kv_cache_expanded_bytes=expanded,
                        kv_cache_index_bytes=index)
