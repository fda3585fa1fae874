"""One transformer block: serial or parallel layout, norms placed pre, post or sandwich.

`block_layout(cfg)` is the one structural description of a block (which norms sit where, how the branches
combine, which attention and FFN): the Block module is built from it, the activation closed form and the
diagram (app/diagram.py) read it. Below the module: the block's closed forms, summed from the families.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.attention import (Attention, LayerKV, attention_matmul_params, attention_params,
                                     attention_saved_bytes)
from engine.layers.ffn import GATE_ACTIVATION, ffn_matmul_params, ffn_params, ffn_saved_bytes, make_ffn
from engine.layers.indexer import Chosen, IndexerLayout, indexer_layout, indexer_params
from engine.layers.init import init_norm
from engine.layers.mla import MLA, MLALayout, mla_layout, mla_matmul_params, mla_params, mla_saved_bytes
from engine.layers.moe import MoE, moe_matmul_params, moe_params, moe_saved_bytes
from engine.layers.norm import make_norm, norm_params, norm_saved_bytes
from engine.validation import Knobs, declare

if TYPE_CHECKING:   # engine.config assembles ModelConfig from this module's knobs
    from engine.config import ModelConfig


# ---- declared fields (engine/config.py assembles every family's into ModelConfig) ----------------------------
@dataclass(frozen=True)
class BlockKnobs(Knobs):
    """How a block combines its branches, and what every linear layer carries."""
    block: str = declare("serial", "block", "serial: attention then FFN; parallel: both read the same input and "
                          "their outputs are added.", choices=("serial", "parallel"))
    parallel_shared_norm: bool = declare(False, "block", "One norm feeds both branches of a parallel block; ignored for serial blocks.")
    bias: bool = declare(True, "block", "Biases on every linear layer in attention and FFN.")
    dropout: float = declare(0.0, "block", "Share of activations zeroed at random during training.", lo=0, hi=1,
                              hi_open=True)


@dataclass(frozen=True)
class BlockLayout:
    parallel: bool              # y = x + A(.) + F(.) instead of two residual steps
    placement: str              # "pre", "post" or "sandwich"
    input_norms: int            # norms on the way into the branches: 2, 1 (parallel, shared) or 0 (post)
    branch_norms: bool          # sandwich: a norm on each branch output before the residual add
    residual_norms: int         # post: norms on the residual sums (2 serial, 1 parallel)
    norm: str                   # "layernorm" or "rmsnorm", with a gain when norm_affine
    norm_affine: bool
    attention: str              # "MHA", "GQA", "MQA" or "MLA"
    qk_norm: bool
    rope_fraction: float | None  # None: no rotary positions
    window: int | None          # sliding window of the local layers
    global_every: int | None    # with a window: every k-th layer is global
    attn_softcap: float | None
    ffn: str                    # the config's choice, e.g. "gelu" or "swiglu"
    gated: bool
    activation: str             # the activation function inside the FFN (the gate's, when gated)
    experts: int | None = None  # MoE layers: routed experts E (None: every FFN dense)
    experts_per_token: int = 0  # k of E
    shared_experts: int = 0
    attn_sinks: bool = False    # a learned logit per head in the softmax (gpt-oss)
    mla: MLALayout | None = None  # latent attention: its projections, latent norms and cached tensors
    indexer: IndexerLayout | None = None   # sparse attention: the lightning indexer choosing MLA's keys

    @property
    def norm_count(self) -> int:
        """Norms of width d_model in one block."""
        return self.input_norms + 2 * self.branch_norms + self.residual_norms


def block_layout(cfg: ModelConfig, layer: int = 0) -> BlockLayout:
    """The structure of block `layer` (0-based; blocks differ only in their window and, with sparse attention,
    whether they run their own indexer)."""
    parallel, placement = cfg.block == "parallel", cfg.norm_placement
    post = placement == "post"
    inputs = 0 if placement in ("post", "post_branch") else (1 if parallel and cfg.parallel_shared_norm else 2)
    return BlockLayout(
        parallel=parallel, placement=placement, input_norms=inputs,
        branch_norms=placement in ("sandwich", "post_branch"),
        residual_norms=(1 if parallel else 2) if post else 0, norm=cfg.norm, norm_affine=cfg.norm_affine,
        attention=cfg.attention_kind, qk_norm=cfg.qk_norm,
        rope_fraction=cfg.rope_fraction if cfg.position == "rope" else None, window=cfg.attn_window,
        global_every=cfg.global_every if cfg.attn_window is not None else None, attn_softcap=cfg.attn_softcap,
        ffn=cfg.ffn, gated=cfg.gated, activation=GATE_ACTIVATION[cfg.ffn] if cfg.gated else cfg.ffn,
        experts=cfg.n_experts, experts_per_token=cfg.experts_per_token if cfg.n_experts else 0,
        shared_experts=(cfg.n_shared_experts or 0) if cfg.n_experts else 0, attn_sinks=cfg.attn_sinks,
        mla=mla_layout(cfg) if cfg.mla else None,
        indexer=indexer_layout(cfg, layer) if cfg.mla and cfg.sparse_attention else None)


def block_norm_count(cfg: ModelConfig) -> int:
    """Norms of width d_model in one block (the modules Block creates)."""
    return block_layout(cfg).norm_count


class Block(nn.Module):
    """serial pre:      x = x + A(N1(x));      x = x + F(N2(x))
    serial post:     x = N1(x + A(x));      x = N2(x + F(x))
    serial sandwich: x = x + P1(A(N1(x)));  x = x + P2(F(N2(x)))
    parallel pre:    x = x + A(N1(x)) + F(N2(x))      (N2 is N1 with a shared norm)
    parallel post:   x = N1(x + A(x) + F(x))
    parallel sandwich: x = x + P1(A(N1(x))) + P2(F(N2(x)))
    serial post_branch:   x = x + P1(A(x));  x = x + P2(F(x))      (OLMo-2: no norm on the way in)
    parallel post_branch: x = x + P1(A(x)) + P2(F(x))"""

    def __init__(self, cfg: ModelConfig, window: int | None, moe: bool = False, indexer: bool = True):
        super().__init__()
        lay = block_layout(cfg)
        self.parallel, self.placement, self.p = lay.parallel, lay.placement, cfg.dropout
        self.attn = MLA(cfg, indexer) if cfg.mla else Attention(cfg, window)
        self.ffn = MoE(cfg) if moe else make_ffn(cfg)
        self.norm1 = make_norm(cfg) if lay.input_norms or lay.residual_norms else None
        self.norm2 = make_norm(cfg) if 2 in (lay.input_norms, lay.residual_norms) else None
        self.post_attn_norm = make_norm(cfg) if lay.branch_norms else None
        self.post_ffn_norm = make_norm(cfg) if lay.branch_norms else None

    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        self.attn.init_weights(std, out_std, generator)
        self.ffn.init_weights(std, out_std, generator)
        for norm in (self.norm1, self.norm2, self.post_attn_norm, self.post_ffn_norm):
            init_norm(norm)

    def _attn(self, h, pos, rope, cache, chosen):
        y = self.attn(h, pos, rope, cache) if chosen is None else self.attn(h, pos, rope, cache, chosen)
        y = self.post_attn_norm(y) if self.post_attn_norm is not None else y
        return F.dropout(y, self.p, self.training)

    def _ffn(self, h):
        y = self.ffn(h)
        y = self.post_ffn_norm(y) if self.post_ffn_norm is not None else y
        return F.dropout(y, self.p, self.training)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, rope: tuple | None, cache: LayerKV | None = None,
                chosen: Chosen | None = None) -> torch.Tensor:
        # x: [B, T, d] residual stream in and out; every branch (attention, FFN, norms) reads and returns [B, T, d]
        # chosen: sparse attention's kept keys, passed from an indexer layer to the shared layers after it
        if self.placement == "post":
            if self.parallel:
                return self.norm1(x + self._attn(x, pos, rope, cache, chosen) + self._ffn(x))
            x = self.norm1(x + self._attn(x, pos, rope, cache, chosen))
            return self.norm2(x + self._ffn(x))
        if self.parallel:
            h1 = x if self.norm1 is None else self.norm1(x)
            h2 = h1 if self.norm2 is None else self.norm2(x)
            return x + self._attn(h1, pos, rope, cache, chosen) + self._ffn(h2)
        if self.norm1 is None:                          # post_branch
            x = x + self._attn(x, pos, rope, cache, chosen)
            return x + self._ffn(x)
        x = x + self._attn(self.norm1(x), pos, rope, cache, chosen)
        return x + self._ffn(self.norm2(x))


# Closed forms of one block, summed from the attention, FFN and norm families.

def block_params(cfg: ModelConfig, moe: bool = False, indexer: bool = False) -> dict[str, int]:
    """Parameters of one block by component (the names of engine.budget.params.COMPONENTS); an MoE block
    has router, shared_experts and routed_experts instead of ffn; a sparse-attention block running its own
    lightning indexer (indexer=True) adds `indexer`."""
    ffn = moe_params(cfg) if moe else {"ffn": ffn_params(cfg)}
    own = {"indexer": indexer_params(cfg)} if indexer and cfg.mla and cfg.sparse_attention else {}
    return {**(mla_params(cfg) if cfg.mla else attention_params(cfg)), **own, **ffn,
            "norms": block_norm_count(cfg) * norm_params(cfg, cfg.d_model)}


def block_matmul_params(cfg: ModelConfig, moe: bool = False) -> int:
    """Weights of one block that take part in a matrix product per token (2 FLOPs each); an MoE block
    counts the router, the shared experts and the k routed experts one token uses."""
    attn = mla_matmul_params(cfg) if cfg.mla else attention_matmul_params(cfg)
    return attn + (moe_matmul_params(cfg) if moe else ffn_matmul_params(cfg))


def block_saved_bytes(cfg: ModelConfig, B: int, T: int, e: int, window: int | None, impl: str,
                      add: Callable[[str, int], None], moe: bool = False, rope: bool = True) -> None:
    """Bytes autograd saves in one block, by term (`add(term, bytes)`): attention, FFN, dropout noise, and
    the norms with the tensors they read, as the layout places them (linears save their input, which is a
    norm's output or, post-norm, the residual itself)."""
    lay = block_layout(cfg)
    N, d = B * T, cfg.d_model
    tok = N * d * e
    normed = norm_saved_bytes(cfg, N, d, e)
    if cfg.mla:
        mla_saved_bytes(cfg, B, T, e, impl, add)
    else:
        attention_saved_bytes(cfg, B, T, e, window, impl, add, rope)
    if moe:
        for term, n in moe_saved_bytes(cfg, N, e).items():
            add(term, n)
    else:
        add("ffn", ffn_saved_bytes(cfg, N, e))
    add("dropout", 2 * tok if cfg.dropout > 0 else 0)
    if lay.branch_norms:                          # post-branch norms read the branch outputs
        add("norms", 2 * normed)
    if lay.residual_norms:                        # the linears read x itself; norms read residual sums
        add("block_input", tok)
        if lay.parallel:                          # N1(x + attn + ffn)
            add("norms", normed)
        else:                                     # N1(x + attn) feeds the FFN; N2(x1 + ffn)
            add("norms", 2 * normed + tok)
        return
    if lay.input_norms == 0:                      # post_branch: the linears read the residual stream itself
        add("block_input", tok if lay.parallel else 2 * tok)   # x (shared), or x and x + attn
        return
    if lay.parallel:                              # N1 (and N2) read x; their outputs feed the branches
        readers = lay.input_norms
        add("norms", norm_saved_bytes(cfg, N, d, e, readers) + readers * tok)
        return
    add("norms", 2 * (normed + tok))              # N1(x) and its output, N2(x + attn) and its output
