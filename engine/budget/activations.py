"""Activation memory: the bytes autograd saves for forward + F.cross_entropy in OUR implementation.

Derived op by op from engine/model.py and engine/layers/* (each distinct storage counted once, parameters
excluded); each family's part lives beside its module (norm_saved_bytes, ffn_saved_bytes,
attention_saved_bytes, rope_saved_bytes, block_saved_bytes) and this module adds embedding, layers and head. Held against torch.autograd.graph.saved_tensors_hooks by engine/measure/activations.py.
N = B*T tokens, e = element bytes, d = d_model, A = n_heads*head_dim, K = kv_heads*head_dim, f = d_ff,
H = n_heads, V = vocab. What each op saves for backward:
  linear            its input (shared when several linears read the same tensor)
  LayerNorm         input + mean + rstd (one per row, input dtype on CPU);   RMSNorm  input + fp32 rstd
                    (+ the fp32 normalized x when there is a gain); in bf16/fp16 it computes in fp32 and
                    saves its own fp32 copy of the input instead of the input
  GELU/SiLU         input;  ReLU  output (the same tensor the next linear saves)
  gated FFN         act input (not ReLU), act output, up output, their product; the clamped SwiGLU 7 f-wide
                    tensors (g, u, clamped g, its sigmoid, the SiLU product, u' + 1, the product)
  MoE layer         router, dispatch, experts on N*k rows, shared experts, router losses (moe_saved_bytes in
                    engine/layers/moe.py; the same for any spread of the tokens over the experts)
  other mixers      each kind's own closed form beside its module (Gated DeltaNet: engine/layers/gdn.py
                    gdn_saved_bytes: conv input and output, fp32 q/k/v, gates, the gated norm; its delta rule
                    recomputes its chunks in backward and keeps only its inputs)
  SDPA (CPU flash)  q, k, v as passed (K-wide for GQA), output, logsumexp B*H*T fp32, window mask T*T*e
                    (ALiBi: its additive mask H*T*T*e instead)
  SDPA + dropout    falls back to the math path, in fp32 on CPU: q, k^T, v broadcast to A, probs, dropout
                    noise, dropped probs (3 x B*H*T*T*4), and a copy of the output for o_proj
  explicit path     q, k^T, v (A-wide after repeat), bool mask T*T, (tanh of capped scores), fp32 softmax
                    output (sinks: T + 1 columns; sinks always take this path), then dropout noise + dropped
                    probs, or the probs cast to e; output copy
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
from engine.layers.attention import ATTENTION_IMPLS
from engine.layers.block import block_saved_bytes
from engine.layers.norm import norm_saved_bytes
from engine.layers.position import rope_saved_bytes
from engine.runtime import DTYPE_BYTES
from engine.validation import choice_problem, require, size_problems

RECOMPUTE = ("none", "selective", "full")

IDX = 8   # bytes of an int64 token id


@dataclass(frozen=True)
class ActivationEstimate:
    per_layer: list[int]      # bytes kept for each block (after recompute)
    embedding: int            # token ids, positions, embedding norm/dropout, shared rotary tables
    head: int                 # final norm, head input, (capped) log-probs, targets
    recompute_peak: int       # recompute="full": one block's activations rebuilt during backward
    total: int
    terms: dict[str, int]     # component -> bytes summed over the model (before recompute)
    formula: str


def activation_estimate(cfg: ModelConfig, batch: int, seq: int, dtype: str = "fp32", impl: str = "sdpa",
                        recompute: str = "none") -> ActivationEstimate:
    """Saved bytes for forward + cross-entropy in training mode, per block and for embedding and head."""
    require(choice_problem("dtype", dtype, DTYPE_BYTES), choice_problem("impl", impl, ATTENTION_IMPLS),
            choice_problem("recompute", recompute, RECOMPUTE), *size_problems(batch, seq))
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
    add("embedding", (e if cfg.embed_scale else 0) + (norm_saved_bytes(cfg, N, d, e) if cfg.embed_norm else 0)
        + (tok if cfg.dropout > 0 and cfg.embed_dropout else 0))
    add("rope_tables", rope_saved_bytes(cfg, T, e)[0])
    layers, by_spec = [], {}
    for spec in cfg.layer_specs:      # each distinct layer derived once; every layer adds its terms
        if spec not in by_spec:
            by_spec[spec] = {}
            block_saved_bytes(cfg, spec, B, T, e, impl, adder(by_spec[spec]))
        else:
            for name, n in by_spec[spec].items():
                terms[name] += n
        layers.append(by_spec[spec])
    head: dict[str, int] = {}
    add = adder(head)
    add("head_input", norm_saved_bytes(cfg, N, d, e) + tok if cfg.final_norm else tok)
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
    windows = ("; layers differ by kind (layer_types, ffn_types)" if cfg.hybrid
               else "; layers differ only by their window masks" if cfg.attn_window is not None else "")
    return (f"saved by autograd ({impl} attention, N=B*T={B * T}, e={e} B): layer 1 = {body} B "
            f"(x {L} layers{windows}); embedding "
            + " + ".join(f"{k} {v:,}" for k, v in emb.items()) + "; head "
            + " + ".join(f"{k} {v:,}" for k, v in head.items()) + extra[recompute])
