"""FLOPs of one training step and of inference, counted the way torch's FlopCounterMode counts them.

A multiply-add is 2 FLOPs; only matrix products count (norms, softmax, activations are not counted, as in
FlopCounterMode, nanoGPT's estimate_mfu and the PaLM appendix). Per token, with d = d_model,
A = n_heads*head_dim, K = kv_heads*head_dim, f = d_ff, V = vocab, L = layers:
  matmuls     2 * L * (d*A + 2*d*K + A*d + (2 or 3)*d*f) + 2*d*V          (= 2 * matrix params)
              an MoE layer replaces (2 or 3)*d*f by what one token uses (engine/layers/moe.py): router E*d,
              shared experts, k of the E routed experts; so FLOPs follow active parameters, memory total ones
  attention   2 * 2 * A * T_visible per layer (QK^T and PV); T_visible = T for every query by default
              (the full square, as FlopCounterMode and the 12*L*H*Q*T rule count it); causal=True counts
              only visible keys: (i+1) for query i, min(i+1, window) on window layers. The headline
              (page metric row, Budgets, Compare, CLI `flops`) is causal=True: what a causal, windowed kernel needs
  sparse      (DSA, engine/layers/indexer.py) MLA attends to min(i+1, index_topk) keys for query i (causal; the
              full square T^2 is what a dense kernel under the top-k mask computes, as FlopCounterMode counts
              it), while each layer's lightning indexer scores every visible key: its projections
              2*(rq*H_I*D_I + d*D_I + d*H_I) a token plus 2*H_I*(D_I + 1) a query-key pair
Backward = 2 x forward (gradient w.r.t. inputs and w.r.t. weights for every product), except the indexer's,
which runs without gradients. Fused attention kernels also recompute QK^T in backward (+0.5 x attention
forward); that is not added here.
Each layer family holds its part (engine/layers/attention.py, ffn.py, moe.py, block.py); this module sums over
layers. Rules of thumb beside it: 6N per token (N = active non-embedding params) and 6N + 12*L*H*Q*T (PaLM,
Q = head_dim).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.budget.memory import DTYPE_BYTES, kv_cache_bytes
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.layers.attention import keys_held, query_key_pairs, score_flops
from engine.layers.block import block_matmul_params
from engine.layers.indexer import index_score_flops, indexer_matmul_params
from engine.units import fmt_flops
from engine.validation import require, size_problems


@dataclass(frozen=True)
class FlopBudget:
    forward_flops: int
    backward_flops: int
    flops_per_token: float         # training (forward + backward) per token of the batch
    attention_flops: int           # forward QK^T + PV
    matmul_flops: int              # forward weight matmuls (projections, FFN, head; not the indexer's)
    six_n_per_token: int           # 6N rule, N = non-embedding params
    palm_per_token: int            # 6N + 12*L*H*Q*T
    formulas: dict[str, str]
    causal: bool = False           # True: only visible query-key pairs (the headline); False: the full square
    indexer_flops: int = 0         # sparse attention: the lightning indexers' forward (no backward)

    @property
    def train_flops(self) -> int:
        return self.forward_flops + self.backward_flops

    def as_dict(self) -> dict:
        return {**asdict(self), "train_flops": self.train_flops}


def matmul_params(cfg: ModelConfig) -> int:
    """Weights that take part in a matrix product per token (not biases, norms, embeddings or positions);
    in an MoE layer only the router, the shared experts and the k routed experts a token is sent to."""
    n_moe = sum(cfg.moe_layers)
    moe = block_matmul_params(cfg, moe=True) if n_moe else 0
    return (cfg.n_layers - n_moe) * block_matmul_params(cfg) + n_moe * moe + cfg.d_model * cfg.vocab_size


def _key_limits(cfg: ModelConfig) -> list[int | None]:
    """Per layer, the most keys one query attends to: its window, or with sparse attention index_topk."""
    return [cfg.index_topk] * cfg.n_layers if cfg.mla and cfg.sparse_attention else cfg.layer_windows


def _query_key_pairs(cfg: ModelConfig, seq: int, causal: bool) -> int:
    """Query-key pairs of one sequence summed over layers (each layer with its own window or top-k)."""
    return sum(query_key_pairs(seq, w, causal) for w in _key_limits(cfg))


def indexer_flops(cfg: ModelConfig, batch: int, tokens: int, pairs: int) -> int:
    """Forward FLOPs of every lightning indexer: projections for `tokens` tokens a sequence, scores over
    `pairs` query-key pairs a sequence (every visible key, not only the top-k)."""
    if not (cfg.mla and cfg.sparse_attention):
        return 0
    per_layer = 2 * indexer_matmul_params(cfg) * batch * tokens + index_score_flops(cfg, batch, pairs)
    return sum(cfg.indexer_layers) * per_layer


def flops_budget(cfg: ModelConfig, batch: int, seq: int, causal: bool = False) -> FlopBudget:
    """Forward/backward FLOPs of a training step on `batch` sequences of `seq` tokens."""
    require(*size_problems(batch, seq))
    tokens, weights = batch * seq, matmul_params(cfg)
    mm = 2 * weights * tokens
    attn = score_flops(cfg, batch, _query_key_pairs(cfg, seq, causal))
    index = indexer_flops(cfg, batch, seq, query_key_pairs(seq, None, causal))
    fwd = mm + attn + index
    n = count_params(cfg).active_non_embedding   # == non_embedding for a dense model
    L, H, Q = cfg.n_layers, cfg.n_heads, cfg.head_width
    scope = "only visible (causal/window) query-key pairs" if causal else "the full T x T square (no causal halving)"
    formulas = {
        "matmul_flops": f"2 * {weights:,} matrix params * B*T={tokens:,} tokens",
        "attention_flops": (f"2 * H={H} * (qk_head_dim={cfg.qk_head_dim} + v_head_dim={cfg.v_head_dim}) (QK^T, PV)"
                            if cfg.mla else f"2 products (QK^T, PV) * 2 * A={cfg.attn_width}")
                           + f" * B={batch} * query-key pairs over {L} layers; {scope}",
        "forward_flops": "matmul_flops + attention_flops" + (" + indexer_flops" if index else ""),
        "backward_flops": "2 * " + ("(matmul_flops + attention_flops): the indexer has no backward" if index else
                                    "forward_flops") + " (grads w.r.t. inputs and weights)",
        "flops_per_token": "(forward + backward) / (B*T)",
        "six_n_per_token": f"6 * N, N = {n:,} active non-embedding params",
        "palm_per_token": f"6N + 12 * L={L} * H={H} * Q={Q} * T={seq}",
    }
    if index:
        formulas["attention_flops"] += f"; MLA attends to at most index_topk={cfg.index_topk:,} keys a query"
        formulas["indexer_flops"] = (
            f"{sum(cfg.indexer_layers)} indexer layers * (2 * {indexer_matmul_params(cfg):,} projection weights * "
            f"{tokens:,} tokens + 2 * H_I={cfg.index_n_heads} * (D_I={cfg.index_head_dim} + 1) * B={batch} * "
            f"query-key pairs, every visible key)")
    bwd = 2 * (mm + attn)
    return FlopBudget(forward_flops=fwd, backward_flops=bwd, flops_per_token=(fwd + bwd) / tokens,
                      attention_flops=attn, matmul_flops=mm, six_n_per_token=6 * n,
                      palm_per_token=6 * n + 12 * L * H * Q * seq, formulas=formulas, causal=causal,
                      indexer_flops=index)


def headline_flops(cfg: ModelConfig, batch: int, seq: int) -> FlopBudget:
    """The FLOPs every page and the CLI lead with: only the query-key pairs a causal, windowed kernel computes."""
    return flops_budget(cfg, batch, seq, causal=True)


def gap_note(cfg: ModelConfig, seq: int) -> str:
    """One sentence, with this config's numbers, on why the headline differs from 6N and from the PaLM rule."""
    causal, full = headline_flops(cfg, 1, seq), flops_budget(cfg, 1, seq)
    head = 6 * cfg.d_model * cfg.vocab_size
    attn_c, attn_f = 3 * causal.attention_flops / seq, 3 * full.attention_flops / seq
    window = " and windowed" if any(w is not None and w < seq for w in cfg.layer_windows) else ""
    if causal.indexer_flops:
        window = f", top-{cfg.index_topk:,} sparse"
    f = fmt_flops
    index = (f", plus {f(causal.indexer_flops / seq)} of lightning indexer (forward only: its projections and a "
             f"score for every visible key)" if causal.indexer_flops else "")
    return (f"The headline {f(causal.flops_per_token)} per token is 6 FLOPs per matrix weight, the output head "
            f"included ({f(head)}, which 6N = {f(causal.six_n_per_token)} leaves out with all of attention), plus "
            f"{f(attn_c)} of attention over the query-key pairs a causal{window} kernel computes at T = {seq:,}"
            f"{index}; "
            f"the PaLM rule 6N + 12·L·H·Q·T = {f(causal.palm_per_token)} charges the full T×T square "
            f"({f(attn_f)}, {attn_f / attn_c:.1f}× that), as torch's FlopCounterMode does "
            f"(full square: {f(full.flops_per_token)} per token).")


def decode_flops(cfg: ModelConfig, batch: int, context: int) -> int:
    """Forward FLOPs of one decode step: one new token per sequence attending to `context` cached tokens
    (window layers to at most `window` of them; sparse attention to index_topk, after its indexer scored all
    context + 1)."""
    mm = 2 * matmul_params(cfg) * batch
    held = sum(keys_held(context + 1, w) for w in _key_limits(cfg))
    return mm + score_flops(cfg, batch, held) + indexer_flops(cfg, batch, 1, context + 1)


@dataclass(frozen=True)
class Intensity:
    phase: str          # "prefill" (B*T tokens at once) or "decode" (one token per sequence)
    flops: int
    bytes: int          # weights read once + KV cache written (prefill) or read (decode)
    formula: str

    @property
    def flops_per_byte(self) -> float:
        return self.flops / self.bytes


def arithmetic_intensity(cfg: ModelConfig, batch: int, seq: int, dtype: str = "bf16") -> dict[str, Intensity]:
    """FLOPs per byte of memory traffic: prefill of `seq` tokens vs one decode step after `seq` tokens.
    Traffic counts the weights (read once per forward) and the KV cache; activations are assumed to stay
    on chip, so decode's intensity is about 2 * batch FLOPs per weight element."""
    weights = count_params(cfg).total * DTYPE_BYTES[dtype]
    pre = flops_budget(cfg, batch, seq, causal=True).forward_flops
    dec = decode_flops(cfg, batch, seq)
    kv_pre, kv_dec = kv_cache_bytes(cfg, batch, seq, dtype), kv_cache_bytes(cfg, batch, seq + 1, dtype)
    return {"prefill": Intensity("prefill", pre, weights + kv_pre,
                                 "causal forward FLOPs / (weights + KV cache written)"),
            "decode": Intensity("decode", dec, weights + kv_dec,
                                "one-token forward FLOPs / (weights + KV cache read)")}
