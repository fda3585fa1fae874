"""One transformer block: serial or parallel layout, norms placed pre, post or sandwich; its mixer(s) and FFN as
the layer's `LayerSpec` says (engine/layers/mixers.py): attention, a recurrent mixer, both side by side, or none;
a dense FFN, an MoE or none.

`block_layout(cfg, spec)` is the one structural description of a block (which norms sit where, how the branches
combine, which attention and FFN): the Block module is built from it, the activation closed form and the
diagram (app/diagram.py) read it. Below the module: the block's closed forms, summed from the families.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.attention import LayerKV
from engine.layers.ffn import GATE_ACTIVATION, ffn_matmul_params, ffn_params, ffn_saved_bytes, make_ffn
from engine.layers.indexer import Chosen, IndexerLayout, indexer_layout
from engine.layers.init import init_norm
from engine.layers.kinds import LayerSpec
from engine.layers.mixers import MIXERS, spec_mixers
from engine.layers.mla import MLALayout, mla_layout
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
    residual_alpha: float = declare(1.0, "block", "The residual stream is multiplied by alpha before each branch "
                                    "output is added (x <- alpha x + F(.)); with post-norm this is DeepNorm, alpha = "
                                    "(2 N)^(1/4) keeping deep post-norm stacks trainable (MiniMax-01: 160^(1/4) = "
                                    "3.5566).", lo=0, lo_open=True)
    embed_dropout: bool = declare(True, "block", "With dropout: also drop entries of the token embeddings (GPT-2); "
                                   "off drops only attention weights and branch outputs (Seed-OSS).")


@dataclass(frozen=True)
class BlockLayout:
    parallel: bool              # y = x + A(.) + F(.) instead of two residual steps
    placement: str              # "pre", "post", "sandwich" or "post_branch"
    input_norms: int            # norms on the way into the branches: 2, 1 (parallel shared, or one branch), 0
    branch_norms: bool          # sandwich, post_branch: a norm on each branch output before the residual add
    residual_norms: int         # post: norms on the residual sums (one per serial branch, 1 parallel)
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
    mixers: tuple[str, ...] = ("attention",)   # this layer's mixer kinds (engine/layers/mixers.py); () none
    ffn_kind: str = "dense"     # this layer's FFN: "dense", "moe" or "none"
    attn_gate: str | None = None  # the attention output gate: "elementwise", "head" or None
    chunk: int | None = None    # chunked local attention: block size of the chunked layers (Llama 4)
    qk_norm_rope_only: bool = False   # QK-norm without gain, only where RoPE runs (Llama 4)
    temperature: str | None = None    # the long-context query temperature, as a formula
    indexer: IndexerLayout | None = None   # sparse attention: the lightning indexer choosing MLA's keys

    @property
    def branches(self) -> int:
        """Branches on the residual stream: the mixer(s) and the FFN, each when present."""
        return bool(self.mixers) + (self.ffn_kind != "none")

    @property
    def norm_count(self) -> int:
        """Norms of width d_model in one block."""
        return self.input_norms + self.branch_norms * self.branches + self.residual_norms


def plain_spec(cfg: ModelConfig, moe: bool = False) -> LayerSpec:
    """An attention layer with full attention and a dense (or MoE) FFN: the block of a one-kind model (with
    sparse attention, running its own indexer)."""
    index = "full" if cfg.mla and cfg.sparse_attention else None
    return LayerSpec(("attention",), "moe" if moe else "dense", None, "global" if cfg.position == "rope" else None,
                     index=index)


def block_layout(cfg: ModelConfig, spec: LayerSpec | None = None) -> BlockLayout:
    """The structure of a block with `spec` (the first layer's kind of a one-kind model by default)."""
    spec = spec or plain_spec(cfg)
    parallel, placement = cfg.block == "parallel", cfg.norm_placement
    present = bool(spec.mixers) + (spec.ffn != "none")   # a parallel block always has both (a config rule)
    inputs = 0 if placement in ("post", "post_branch") else (1 if parallel and cfg.parallel_shared_norm else present)
    return BlockLayout(
        parallel=parallel, placement=placement, input_norms=inputs,
        branch_norms=placement in ("sandwich", "post_branch"),
        residual_norms=(1 if parallel else present) if placement == "post" else 0, norm=cfg.norm,
        norm_affine=cfg.norm_affine, attention=cfg.attention_kind, qk_norm=cfg.qk_norm,
        rope_fraction=cfg.rope_fraction if cfg.position == "rope" else None, window=cfg.attn_window,
        global_every=cfg.global_every if cfg.attn_window is not None else None, attn_softcap=cfg.attn_softcap,
        ffn=cfg.ffn, gated=cfg.gated, activation=GATE_ACTIVATION[cfg.ffn] if cfg.gated else cfg.ffn,
        experts=cfg.n_experts, experts_per_token=cfg.experts_per_token if cfg.n_experts else 0,
        shared_experts=(cfg.n_shared_experts or 0) if cfg.n_experts else 0, attn_sinks=cfg.attn_sinks,
        mla=mla_layout(cfg) if cfg.mla else None, mixers=spec.mixers, ffn_kind=spec.ffn, attn_gate=cfg.attn_gate,
        chunk=cfg.attn_chunk if cfg.layer_types and any("chunked" in w.split("+") for w in cfg.layer_types) else None,
        qk_norm_rope_only=cfg.qk_norm and cfg.qk_norm_scope == "rope_heads", temperature=_temperature(cfg),
        indexer=indexer_layout(cfg, spec.index == "full") if spec.index else None)


def _temperature(cfg: ModelConfig) -> str | None:
    if cfg.attn_temperature is None:
        return None
    p = "(p+1)" if cfg.attn_temperature_one_based else "p"
    where = " on NoPE layers" if cfg.attn_temperature_layers == "nope" else ""
    return f"q × (1 + {cfg.attn_temperature:g}·ln(1 + ⌊{p}/{cfg.attn_temperature_floor:,}⌋)){where}"


def block_norm_count(cfg: ModelConfig, spec: LayerSpec | None = None) -> int:
    """Norms of width d_model in one block (the modules Block creates)."""
    return block_layout(cfg, spec).norm_count


class Block(nn.Module):
    """serial pre:      x = x + A(N1(x));      x = x + F(N2(x))
    serial post:     x = N1(x + A(x));      x = N2(x + F(x))
    serial sandwich: x = x + P1(A(N1(x)));  x = x + P2(F(N2(x)))
    parallel pre:    x = x + A(N1(x)) + F(N2(x))      (N2 is N1 with a shared norm)
    parallel post:   x = N1(x + A(x) + F(x))
    parallel sandwich: x = x + P1(A(N1(x))) + P2(F(N2(x)))
    serial post_branch:   x = x + P1(A(x));  x = x + P2(F(x))      (OLMo-2: no norm on the way in)
    parallel post_branch: x = x + P1(A(x)) + P2(F(x))
    A is the layer's mixer (two mixers side by side: their sum); a serial layer without a mixer or without an
    FFN skips that step and its norms (Nemotron-H's one-mixer-per-layer). With residual_alpha, every x added to
    a branch output is alpha x (DeepNorm)."""
    ROLES = {"norm1": ("norm", "norm"), "norm2": ("norm", "norm"), "post_attn_norm": ("norm", "norm"),
             "post_ffn_norm": ("norm", "norm")}   # roles of the parameters (engine/plan/tensors.py)

    def __init__(self, cfg: ModelConfig, spec: LayerSpec | None = None):
        super().__init__()
        spec = spec or plain_spec(cfg)
        lay = block_layout(cfg, spec)
        self.parallel, self.placement, self.p = lay.parallel, lay.placement, cfg.dropout
        self.alpha = cfg.residual_alpha
        self.mixer_attrs = tuple(m.attr for m in spec_mixers(spec))
        for m in spec_mixers(spec):
            self.add_module(m.attr, m.build(cfg, spec))
        self.ffn = MoE(cfg) if spec.ffn == "moe" else make_ffn(cfg) if spec.ffn == "dense" else None
        mix, ffn = bool(spec.mixers), spec.ffn != "none"
        norms_in = lay.input_norms or lay.residual_norms
        self.norm1 = make_norm(cfg) if norms_in and (mix or lay.parallel) else None
        self.norm2 = make_norm(cfg) if ffn and norms_in and not (lay.parallel and norms_in == 1) else None
        self.post_attn_norm = make_norm(cfg) if lay.branch_norms and mix else None
        self.post_ffn_norm = make_norm(cfg) if lay.branch_norms and ffn else None

    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        for attr in self.mixer_attrs:
            getattr(self, attr).init_weights(std, out_std, generator)
        if self.ffn is not None:
            self.ffn.init_weights(std, out_std, generator)
        for norm in (self.norm1, self.norm2, self.post_attn_norm, self.post_ffn_norm):
            init_norm(norm)

    def _attn(self, h, pos, rope, cache, chosen):
        """The mixer branch: every mixer reads h, their outputs add; sparse MLA also gets the indexer's choice."""
        y = None
        for attr in self.mixer_attrs:
            mixer = getattr(self, attr)
            out = mixer(h, pos, rope, cache) if chosen is None else mixer(h, pos, rope, cache, chosen)
            y = out if y is None else y + out
        y = self.post_attn_norm(y) if self.post_attn_norm is not None else y
        return F.dropout(y, self.p, self.training)

    def _ffn(self, h):
        y = self.ffn(h)
        y = self.post_ffn_norm(y) if self.post_ffn_norm is not None else y
        return F.dropout(y, self.p, self.training)

    def _res(self, x: torch.Tensor) -> torch.Tensor:
        """The residual a branch output is added to: alpha x (a scalar multiply: autograd saves nothing for it)."""
        return x if self.alpha == 1.0 else x * self.alpha

    def forward(self, x: torch.Tensor, pos: torch.Tensor, rope: tuple | None, cache: LayerKV | None = None,
                chosen: Chosen | None = None) -> torch.Tensor:
        # x: [B, T, d] residual stream in and out; every branch (mixers, FFN, norms) reads and returns [B, T, d]
        # chosen: sparse attention's kept keys, passed from an indexer layer to the shared layers after it
        mix, ffn, r = bool(self.mixer_attrs), self.ffn is not None, self._res
        if self.parallel:
            if self.placement == "post":
                return self.norm1(r(x) + self._attn(x, pos, rope, cache, chosen) + self._ffn(x))
            h1 = x if self.norm1 is None else self.norm1(x)
            h2 = h1 if self.norm2 is None else self.norm2(x)
            return r(x) + self._attn(h1, pos, rope, cache, chosen) + self._ffn(h2)
        if self.placement == "post":
            x = self.norm1(r(x) + self._attn(x, pos, rope, cache, chosen)) if mix else x
            return self.norm2(r(x) + self._ffn(x)) if ffn else x
        if mix:
            x = r(x) + self._attn(x if self.norm1 is None else self.norm1(x), pos, rope, cache, chosen)
        return r(x) + self._ffn(x if self.norm2 is None else self.norm2(x)) if ffn else x


# Closed forms of one block, summed from the mixer, FFN and norm families.

def block_params(cfg: ModelConfig, spec: LayerSpec | None = None) -> dict[str, int]:
    """Parameters of one block by component (the names of engine.budget.params.COMPONENTS): its mixers' (a
    sparse-attention layer running its own lightning indexer adds `indexer`), its FFN's (an MoE block has
    router, shared_experts and routed_experts instead of ffn) and its norms."""
    spec = spec or plain_spec(cfg)
    # an A+B layer's two mixers name disjoint components (attention_* and gdn_*, ssm_*...): a merge, not a sum;
    # a shared name would drop a count, which the equality with the built model's parameters() would catch
    out = {name: n for m in spec_mixers(spec) for name, n in m.params(cfg, spec).items()}
    if spec.ffn == "moe":
        out.update(moe_params(cfg))
    elif spec.ffn == "dense":
        out["ffn"] = ffn_params(cfg)
    out["norms"] = block_norm_count(cfg, spec) * norm_params(cfg, cfg.d_model)
    return out


def block_matmul_params(cfg: ModelConfig, spec: LayerSpec | None = None) -> int:
    """Weights of one block that take part in a matrix product per token (2 FLOPs each); an MoE block
    counts the router, the shared experts and the k routed experts one token uses."""
    spec = spec or plain_spec(cfg)
    ffn = {"moe": moe_matmul_params, "dense": ffn_matmul_params}.get(spec.ffn)
    return sum(m.matmul_params(cfg, spec) for m in spec_mixers(spec)) + (ffn(cfg) if ffn else 0)


def block_saved_bytes(cfg: ModelConfig, spec: LayerSpec, B: int, T: int, e: int, impl: str,
                      add: Callable[[str, int], None]) -> None:
    """Bytes autograd saves in one block, by term (`add(term, bytes)`): mixers, FFN, dropout noise, and
    the norms with the tensors they read, as the layout places them (linears save their input, which is a
    norm's output or, post-norm, the residual itself)."""
    lay = block_layout(cfg, spec)
    N, d = B * T, cfg.d_model
    tok = N * d * e
    normed = norm_saved_bytes(cfg, N, d, e)
    for m in spec_mixers(spec):
        m.saved_bytes(cfg, spec, B, T, e, impl, add)
    if spec.ffn == "moe":
        for term, n in moe_saved_bytes(cfg, N, e).items():
            add(term, n)
    elif spec.ffn == "dense":
        add("ffn", ffn_saved_bytes(cfg, N, e))
    branches = lay.branches
    add("dropout", branches * tok if cfg.dropout > 0 else 0)
    if lay.branch_norms:                          # post-branch norms read the branch outputs
        add("norms", branches * normed)
    if lay.residual_norms:                        # the linears read x itself; norms read residual sums
        add("block_input", tok)
        if lay.parallel or branches == 1:         # N1(x + attn + ffn), or one branch's N(x + branch)
            add("norms", normed)
        else:                                     # N1(x + attn) feeds the FFN; N2(x1 + ffn)
            add("norms", 2 * normed + tok)
        return
    if lay.input_norms == 0:                      # post_branch: the linears read the residual stream itself
        add("block_input", tok if lay.parallel else branches * tok)   # x (shared), or x and x + attn
        return
    if lay.parallel:                              # N1 (and N2) read x; their outputs feed the branches
        readers = lay.input_norms
        add("norms", norm_saved_bytes(cfg, N, d, e, readers) + readers * tok)
        return
    add("norms", branches * (normed + tok))       # N1(x) and its output, N2(x + attn) and its output
