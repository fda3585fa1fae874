"""Activation memory: the bytes autograd saves for forward + F.cross_entropy in OUR implementation.

Derived op by op from engine/model.py and engine/layers/* (each distinct storage counted once, parameters
excluded), and held against torch.autograd.graph.saved_tensors_hooks by engine/measure/activations.py.
N = B*T tokens, e = element bytes, d = d_model, A = n_heads*head_dim, K = kv_heads*head_dim, f = d_ff,
H = n_heads, V = vocab. What each op saves for backward:
  linear            its input (shared when several linears read the same tensor)
  LayerNorm         input + mean + rstd (one per row, input dtype on CPU);   RMSNorm  input + fp32 rstd
                    (+ the fp32 normalized x when there is a gain); in bf16/fp16 it computes in fp32 and
                    saves its own fp32 copy of the input instead of the input
  GELU/SiLU         input;  ReLU  output (the same tensor the next linear saves)
  gated FFN         act input (not ReLU), act output, up output, their product
  SDPA (CPU flash)  q, k, v as passed (K-wide for GQA), output, logsumexp B*H*T fp32, window mask T*T*e
                    (ALiBi: its additive mask H*T*T*e instead)
  SDPA + dropout    falls back to the math path, in fp32 on CPU: q, k^T, v broadcast to A, probs, dropout
                    noise, dropped probs (3 x B*H*T*T*4), and a copy of the output for o_proj
  explicit path     q, k^T, v (A-wide after repeat), bool mask T*T, (tanh of capped scores), fp32 softmax
                    output, then dropout noise + dropped probs, or the probs cast to e; output copy
  dropout (CPU)     the scaled noise tensor, e bytes per element (CUDA keeps a 1-byte mask instead)
  RoPE              the cos and sin tables [T, rotary_dim] (fp32, shared by all layers, one pair per table
                    set: global, and local with rope_local_base; other dtypes cast per call: 4 tables per RoPE
                    layer; NoPE layers none)
  cross-entropy     log-softmax output N*V*e, targets N*8, a scalar; logit soft-cap adds tanh output N*V*e
Exact on CPU for fp32, bf16 and fp16 (the tests measure every variant pair); CUDA kernels save differently
(flash/efficient SDPA, 1-byte dropout masks, fp32 LayerNorm statistics), so there it is an estimate.
Recompute is modelled (Korthikanti et al. 2022), not measured:
"full" keeps each block's input plus one block's activations while it is recomputed in backward;
"selective" drops the T*T attention tensors (scores, probabilities, masks, dropout noise).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.config import ModelConfig
from engine.runtime import DTYPE_BYTES

ATTENTION_IMPLS = ("sdpa", "explicit")
STAT, IDX = 4, 8   # fp32 norm statistics and logsumexp; int64 token ids


@dataclass(frozen=True)
class ActivationEstimate:
    per_layer: list[int]      # bytes kept for each block (after recompute)
    embedding: int            # token ids, positions, embedding norm/dropout, shared rotary tables
    head: int                 # final norm, head input, (capped) log-probs, targets
    recompute_peak: int       # recompute="full": one block's activations rebuilt during backward
    total: int
    terms: dict[str, int]     # component -> bytes summed over the model (before recompute)
    formula: str


def _norm_stats(cfg: ModelConfig, rows: int, width: int, e: int) -> int:
    """What a norm saves besides its input: LayerNorm's mean and rstd (input dtype on CPU); RMSNorm's fp32
    rstd and, with a gain, the fp32 normalized x that the gain multiply saves."""
    if cfg.norm == "layernorm":
        return 2 * rows * e
    return rows * STAT + (rows * width * STAT if cfg.norm_affine else 0)


def _normed(cfg: ModelConfig, rows: int, width: int, e: int, readers: int = 1) -> int:
    """Bytes saved by `readers` norms reading one tensor that nothing else saves, input included. RMSNorm in
    bf16/fp16 computes in fp32 and saves its own fp32 copy of the input (one per norm) instead of the input."""
    own_copy = cfg.norm == "rmsnorm" and e != STAT
    inp = readers * rows * width * STAT if own_copy else rows * width * e
    return inp + readers * _norm_stats(cfg, rows, width, e)


def _attention(cfg: ModelConfig, B: int, T: int, e: int, window: int | None, rope: bool, impl: str, add) -> None:
    """Saved tensors of one attention layer, excluding its input (the normed residual) and its output."""
    N, A, K, H, hd = B * T, cfg.attn_width, cfg.kv_width, cfg.n_heads, cfg.head_width
    drop = cfg.dropout > 0
    if cfg.qk_norm:
        add("qk_norm", _normed(cfg, N * H, hd, e) + _normed(cfg, N * cfg.kv_heads, hd, e))
    if rope and e != 4:
        add("rope_tables", 4 * T * cfg.rotary_dim * e)
    scores = B * H * T * T * e
    explicit = impl == "explicit" or cfg.attn_softcap is not None
    if not explicit and not drop:
        add("attn_qkv", N * (A + 2 * K) * e)
        # the kernel's output takes q's layout: a view of q_proj ([B,T,H,hd] memory) makes o_proj's input a
        # view of it; q rebuilt by QK-norm or partial RoPE is [B,H,T,hd]-contiguous, so o_proj gets a copy
        q_rebuilt = cfg.qk_norm or (rope and 0 < cfg.rotary_dim < hd)
        add("attn_out", N * A * e * (2 if q_rebuilt else 1))
        add("attn_lse", B * H * T * STAT)
        if cfg.position == "alibi":                # ALiBi: one additive float mask per head
            add("attn_mask", H * T * T * e)
        elif window is not None:
            add("attn_mask", T * T * e)            # the bool window mask, converted to an additive float mask
        return
    add("attn_out", N * A * e)                     # the [B,T,A] copy o_proj reads
    if not explicit:                               # SDPA's math fallback (dropout) computes in fp32 on CPU:
        add("attn_qkv", 3 * N * A * STAT)          # q, k^T, v broadcast to all H heads,
        add("attn_scores", 3 * B * H * T * T * STAT)   # probabilities, dropout noise, dropped probabilities
        return
    add("attn_qkv", 3 * N * A * e)                 # q, k^T and v, broadcast to all H heads
    add("attn_mask", T * T)                        # bool, one per layer
    add("attn_scores", B * H * T * T * STAT        # softmax output (fp32), then either dropout (noise and
        + (2 * scores if drop else scores if e != STAT else 0)   # dropped probs) or the cast probs
        + (scores if cfg.attn_softcap is not None else 0))       # tanh of the capped scores


def _ffn(cfg: ModelConfig, N: int, e: int) -> int:
    relu = cfg.ffn in ("relu", "reglu")
    width = (3 if relu else 4) if cfg.gated else (1 if relu else 2)
    return width * N * cfg.ffn_width * e


def _layer(cfg: ModelConfig, B: int, T: int, e: int, window: int | None, rope: bool, impl: str, add) -> None:
    N, d = B * T, cfg.d_model
    tok = N * d * e
    normed = _normed(cfg, N, d, e)
    noise = tok if cfg.dropout > 0 else 0
    _attention(cfg, B, T, e, window, rope, impl, add)
    add("ffn", _ffn(cfg, N, e))
    add("dropout", 2 * noise)
    if cfg.norm_placement == "sandwich":          # post-branch norms read the branch outputs
        add("norms", 2 * normed)
    if cfg.norm_placement == "post":              # the linears read x itself; norms read residual sums
        add("block_input", tok)
        if cfg.block == "parallel":               # N1(x + attn + ffn)
            add("norms", normed)
        else:                                     # N1(x + attn) feeds the FFN; N2(x1 + ffn)
            add("norms", 2 * normed + tok)
        return
    if cfg.block == "parallel":                   # N1 (and N2) read x; their outputs feed the branches
        readers = 1 if cfg.parallel_shared_norm else 2
        add("norms", _normed(cfg, N, d, e, readers) + readers * tok)
        return
    add("norms", 2 * (normed + tok))              # N1(x) and its output, N2(x + attn) and its output


def activation_estimate(cfg: ModelConfig, batch: int, seq: int, dtype: str = "fp32", impl: str = "sdpa",
                        recompute: str = "none") -> ActivationEstimate:
    """Saved bytes for forward + cross-entropy in training mode, per block and for embedding and head."""
    e, B, T = DTYPE_BYTES[dtype], batch, seq
    N, d, V = B * T, cfg.d_model, cfg.vocab_size
    tok = N * d * e
    terms: dict[str, int] = {}

    def adder(bucket: dict):
        def add(name: str, n: int) -> None:
            if n:
                bucket[name] = bucket.get(name, 0) + n
                terms[name] = terms.get(name, 0) + n
        return add

    emb: dict[str, int] = {}
    add = adder(emb)
    add("token_ids", N * IDX + (T * IDX if cfg.position == "learned" else 0))
    add("embedding", (e if cfg.embed_scale else 0) + (_normed(cfg, N, d, e) if cfg.embed_norm else 0)
        + (tok if cfg.dropout > 0 else 0))
    kinds = [cfg.layer_rope(i) for i in range(cfg.n_layers)]
    if e == 4:   # one cos/sin pair per table set in use (global, and local with rope_local_base)
        add("rope_tables", 2 * T * cfg.rotary_dim * STAT * len(set(kinds) - {None}))
    layers = []
    for w, kind in zip(cfg.layer_windows, kinds):
        bucket: dict[str, int] = {}
        _layer(cfg, B, T, e, w, kind is not None, impl, adder(bucket))
        layers.append(bucket)
    head: dict[str, int] = {}
    add = adder(head)
    add("head_input", _normed(cfg, N, d, e) + tok if cfg.final_norm else tok)
    add("logits", N * V * e * (2 if cfg.logit_softcap is not None else 1) + N * IDX + e)

    full = [sum(b.values()) for b in layers]
    peak = 0
    if recompute == "full":
        per_layer, peak = [tok] * len(layers), max(full)
    elif recompute == "selective":
        per_layer = [n - b.get("attn_scores", 0) - b.get("attn_mask", 0) for n, b in zip(full, layers)]
    else:
        per_layer = full
    total = sum(emb.values()) + sum(per_layer) + sum(head.values()) + peak
    return ActivationEstimate(per_layer=per_layer, embedding=sum(emb.values()), head=sum(head.values()),
                              recompute_peak=peak, total=total, terms=terms,
                              formula=_formula(cfg, B, T, e, impl, recompute, layers[0], emb, head))


def _formula(cfg, B, T, e, impl, recompute, layer0, emb, head) -> str:
    L = cfg.n_layers
    body = " + ".join(f"{k} {v:,}" for k, v in layer0.items())
    extra = {"none": "", "selective": "; selective recompute drops attn_scores and attn_mask (modelled)",
             "full": "; full recompute keeps only block inputs N*d*e per layer + one block rebuilt (modelled)"}
    windows = "; layers differ only by their window masks" if cfg.attn_window is not None else ""
    return (f"saved by autograd ({impl} attention, N=B*T={B * T}, e={e} B): layer 1 = {body} B "
            f"(x {L} layers{windows}); embedding "
            + " + ".join(f"{k} {v:,}" for k, v in emb.items()) + "; head "
            + " + ".join(f"{k} {v:,}" for k, v in head.items()) + extra[recompute])
