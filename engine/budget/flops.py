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
              2*(rq*H_I*D_I + d*D_I + d*H_I) a token plus 2*H_I*(D_I + 1) a query-key pair (indexer_flops,
              the attention mixer's no_grad_flops)
  recurrent   a recurrent mixer's own products beyond its weights (Gated DeltaNet's chunked delta rule:
              engine/layers/delta_rule.py chunked_flops), none of them growing with the context at decode
Backward = 2 x forward (gradient w.r.t. inputs and w.r.t. weights for every product), except where a kind says
otherwise (Gated DeltaNet recomputes its chunks and its triangular solve's backward differs; the lightning indexer
runs without gradients). Fused attention kernels also recompute QK^T in backward (+0.5 x attention forward); that
is not added here.
Each layer family holds its part (engine/layers/attention.py, ffn.py, moe.py, block.py, each mixer kind's
module); this module sums over layers. Rules of thumb beside it, each as its paper defines it: Kaplan et al. 2020
(scaling laws) 6N per token with N the non-embedding parameters (active ones for an MoE); Chowdhery et al. 2022
(PaLM, appendix B, the MFU convention) 6N + 12*L*H*Q*T with N all the parameters (embeddings included; active ones
for an MoE), Q = head_dim, T = the sequence.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.budget.memory import DTYPE_BYTES, kv_cache_bytes
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.layers.span import query_key_pairs
from engine.layers.block import block_matmul_params
from engine.layers.indexer import indexer_matmul_params
from engine.layers.mixers import layer_groups, spec_mixers
from engine.units import fmt_flops
from engine.validation import choice_problem, require, size_problems


@dataclass(frozen=True)
class FlopBudget:
    forward_flops: int
    backward_flops: int
    flops_per_token: float         # training (forward + backward) per token of the batch
    attention_flops: int           # forward QK^T + PV of the softmax-attention layers
    matmul_flops: int              # forward weight matmuls (projections, FFN, head; not the indexer's)
    six_n_per_token: int           # Kaplan 6N, N = (active) non-embedding params
    palm_per_token: int            # PaLM 6N + 12*L*H*Q*T, N = all (active) params
    formulas: dict[str, str]
    causal: bool = False           # True: only visible query-key pairs (the headline); False: the full square
    recurrent_flops: int = 0       # forward products of recurrent mixers beyond their weights (e.g. delta rule)
    indexer_flops: int = 0         # sparse attention: the lightning indexers' forward (no backward)

    @property
    def train_flops(self) -> int:
        return self.forward_flops + self.backward_flops

    def as_dict(self) -> dict:
        return {**asdict(self), "train_flops": self.train_flops}


def matmul_params(cfg: ModelConfig) -> int:
    """Weights that take part in a matrix product per token (not biases, norms, embeddings or positions);
    in an MoE layer only the router, the shared experts and the k routed experts a token is sent to."""
    return sum(n * block_matmul_params(cfg, spec) for spec, n in layer_groups(cfg)) + cfg.d_model * cfg.vocab_size


def mixer_flops(cfg: ModelConfig, batch: int, seq: int, causal: bool) -> tuple[int, int, int, int]:
    """(softmax attention, recurrent mixers, no-gradient parts such as DSA's lightning indexer) forward products
    beyond the weights, summed over layers, and the backward of all (each kind's own rule)."""
    attention = recurrent = no_grad = backward = 0
    for spec, n in layer_groups(cfg):
        for m in spec_mixers(spec):
            free = n * m.no_grad_flops(cfg, spec, batch, seq, causal)
            forward = n * m.forward_flops(cfg, spec, batch, seq, causal) - free
            backward += n * m.backward_flops(cfg, spec, batch, seq, causal)
            no_grad += free
            if m.recurrent:
                recurrent += forward
            else:
                attention += forward
    return attention, recurrent, no_grad, backward


def flops_budget(cfg: ModelConfig, batch: int, seq: int, causal: bool = False) -> FlopBudget:
    """Forward/backward FLOPs of a training step on `batch` sequences of `seq` tokens."""
    require(*size_problems(batch, seq))
    tokens, weights = batch * seq, matmul_params(cfg)
    mm = 2 * weights * tokens
    attn, recurrent, index, mixer_backward = mixer_flops(cfg, batch, seq, causal)
    fwd = mm + attn + recurrent + index
    pc = count_params(cfg)
    n, n_all = pc.active_non_embedding, pc.active   # == non_embedding / total for a dense model
    L, H, Q = cfg.n_layers, cfg.n_heads, cfg.head_width
    scope = "only visible (causal/window) query-key pairs" if causal else "the full T x T square (no causal halving)"
    groups = layer_groups(cfg)
    attending = sum(count for spec, count in groups if spec.attention)
    over = f"{L} layers" if attending == L else f"the {attending} attention layers of {L}"
    recurring = any(m.recurrent for spec, _ in groups for m in spec_mixers(spec))
    formulas = {
        "matmul_flops": f"2 * {weights:,} matrix params * B*T={tokens:,} tokens",
        "attention_flops": (f"2 * H={H} * (qk_head_dim={cfg.qk_head_dim} + v_head_dim={cfg.v_head_dim}) (QK^T, PV)"
                            if cfg.mla else f"2 products (QK^T, PV) * 2 * A={cfg.attn_width}")
                           + f" * B={batch} * query-key pairs over {over}; {scope}",
        "recurrent_flops": ("each recurrent mixer's own products (e.g. Gated DeltaNet's chunked delta rule: "
                            "engine/layers/delta_rule.py chunked_flops), summed over its layers" if recurring
                            else "0: no recurrent layer"),
        "forward_flops": "matmul_flops + attention_flops" + (" + recurrent_flops" if recurring else "")
                         + (" + indexer_flops" if index else ""),
        "backward_flops": "2 * (matmul_flops + attention_flops) (grads w.r.t. inputs and weights)"
                          + (" + the recurrent mixers' backward (each kind's own; Gated DeltaNet: a recompute, "
                             "then its products' gradients)" if recurring else "")
                          + ("; the indexer has no backward" if index else ""),
        "flops_per_token": "(forward + backward) / (B*T)",
        "six_n_per_token": f"Kaplan et al. 2020: 6 * N, N = {n:,} (active) non-embedding params",
        "palm_per_token": f"Chowdhery et al. 2022 (PaLM): 6 * N + 12 * L={L} * H={H} * Q={Q} * T={seq}, "
                          f"N = {n_all:,} (active) params, embeddings included",
    }
    if index:
        own = sum(n for spec, n in groups if spec.index == "full")
        formulas["attention_flops"] += f"; MLA attends to at most index_topk={cfg.index_topk:,} keys a query"
        formulas["indexer_flops"] = (
            f"{own} indexer layers * (2 * {indexer_matmul_params(cfg):,} projection weights * "
            f"{tokens:,} tokens + 2 * H_I={cfg.index_n_heads} * (D_I={cfg.index_head_dim} + 1) * B={batch} * "
            f"query-key pairs, every visible key)")
    backward = 2 * mm + mixer_backward
    return FlopBudget(forward_flops=fwd, backward_flops=backward, flops_per_token=(fwd + backward) / tokens,
                      attention_flops=attn, matmul_flops=mm, six_n_per_token=6 * n,
                      palm_per_token=6 * n_all + 12 * L * H * Q * seq, formulas=formulas, causal=causal,
                      recurrent_flops=recurrent, indexer_flops=index)


def headline_flops(cfg: ModelConfig, batch: int, seq: int) -> FlopBudget:
    """The FLOPs every page and the CLI lead with: only the query-key pairs a causal, windowed kernel computes."""
    return flops_budget(cfg, batch, seq, causal=True)


def gap_note(cfg: ModelConfig, seq: int) -> str:
    """One sentence, with this config's numbers, on why the headline differs from 6N and from the PaLM rule."""
    causal, full = headline_flops(cfg, 1, seq), flops_budget(cfg, 1, seq)
    head = 6 * cfg.d_model * cfg.vocab_size
    attn_c, attn_f = 3 * causal.attention_flops / seq, 3 * full.attention_flops / seq
    window = " and windowed" if any(query_key_pairs(seq, s.window, True) < query_key_pairs(seq, None, True)
                                    for s, _ in layer_groups(cfg) if s.attention) else ""
    if causal.indexer_flops:
        window = f", top-{cfg.index_topk:,} sparse"
    f = fmt_flops
    index = (f", plus {f(causal.indexer_flops / seq)} of lightning indexer (forward only: its projections and a "
             f"score for every visible key)" if causal.indexer_flops else "")
    return (f"The headline {f(causal.flops_per_token)} per token is 6 FLOPs per matrix weight, the output head "
            f"included ({f(head)}, which Kaplan's 6N = {f(causal.six_n_per_token)} leaves out with all of "
            f"attention), plus "
            f"{f(attn_c)} of attention over the query-key pairs a causal{window} kernel computes at T = {seq:,}"
            f"{index}; "
            f"the PaLM rule 6N + 12·L·H·Q·T = {f(causal.palm_per_token)} (N with the embeddings) charges the "
            f"full T×T square "
            f"({f(attn_f)}, {attn_f / attn_c:.1f}× that), as torch's FlopCounterMode does "
            f"(full square: {f(full.flops_per_token)} per token).")


def decode_flops(cfg: ModelConfig, batch: int, context: int) -> int:
    """Forward FLOPs of one decode step: one new token per sequence, at position `context`, attending to the
    cached tokens it sees (window layers at most `window` of them, chunked layers those of its own chunk, sparse
    attention index_topk after its indexer scored all context + 1); a recurrent layer's step does not grow with
    the context."""
    mm = 2 * matmul_params(cfg) * batch
    return mm + sum(n * m.decode_flops(cfg, spec, batch, context)
                    for spec, n in layer_groups(cfg) for m in spec_mixers(spec))


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
    require(choice_problem("dtype", dtype, DTYPE_BYTES), *size_problems(batch, seq))
    weights = count_params(cfg).total * DTYPE_BYTES[dtype]
    pre = flops_budget(cfg, batch, seq, causal=True).forward_flops
    dec = decode_flops(cfg, batch, seq)
    kv_pre, kv_dec = kv_cache_bytes(cfg, batch, seq, dtype), kv_cache_bytes(cfg, batch, seq + 1, dtype)
    return {"prefill": Intensity("prefill", pre, weights + kv_pre,
                                 "causal forward FLOPs / (weights + KV cache written)"),
            "decode": Intensity("decode", dec, weights + kv_dec,
                                "one-token forward FLOPs / (weights + KV cache read)")}
