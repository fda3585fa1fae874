"""DecoderLM: token ids [B, T] -> logits [B, T, vocab]; every ModelConfig knob is a real module choice.

Built on the meta device first (no memory, no init work), then materialised and initialised once:
`build_model(cfg, device="meta")` sizes even a 70B model in about a second.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import ModelConfig
from engine.layers.attention import ATTENTION_IMPLS, Attention, LayerKV
from engine.layers.block import Block
from engine.layers.indexer import Chosen
from engine.layers.init import init_linear, init_norm
from engine.layers.moe import MoE
from engine.layers.norm import make_norm
from engine.layers.position import model_rope_tables, plain_inv_freq, sinusoidal_table, tables_from
from engine.validation import choice_problem, require


class KVCache:
    """Per-layer decode cache: keys/values of attention layers, the fixed state of recurrent ones (LayerKV);
    `pos` is the number of tokens seen so far."""

    def __init__(self, n_layers: int, index_keys: str = "fp8"):
        """index_keys: how sparse-attention layers hold their indexer keys, "fp8" (DeepSeek's kernels: FP8 with
        an fp32 scale per 128 values) or "dtype" (the model's dtype, as transformers holds them)."""
        self.layers = [LayerKV(index_keys) for _ in range(n_layers)]
        self.pos = 0

    def nbytes(self) -> int:
        return sum(layer.nbytes() for layer in self.layers)

    def kv_nbytes(self) -> int:
        return sum(layer.kv_nbytes() for layer in self.layers)

    def state_nbytes(self) -> int:
        return sum(layer.state_nbytes() for layer in self.layers)


def _embedding(n: int, d: int) -> nn.Embedding:
    """An uninitialised table (init_weights fills it): nn.Embedding's own normal_ init is wasted work, and on
    the meta device it imports torch._dynamo, about 1.5 s on the first build in a process."""
    return nn.Embedding(n, d, _weight=torch.empty(n, d))


class DecoderLM(nn.Module):
    ROLES = {"tok_emb": ("embedding", "embedding"), "pos_emb": ("positions", "positions"), "emb_norm": ("norm", "norm"),
             "final_norm": ("norm", "norm"), "head": ("head", "head")}   # roles (engine/plan/tensors.py)

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = _embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = _embedding(cfg.context_length, cfg.d_model) if cfg.position == "learned" else None
        self.emb_norm = make_norm(cfg) if cfg.embed_norm else None
        self.blocks = nn.ModuleList(Block(cfg, spec) for spec in cfg.layer_specs)
        self.final_norm = make_norm(cfg) if cfg.final_norm else None
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=cfg.head_bias)
        self.tie()

    def tie(self) -> None:
        """Tied embeddings are one Parameter in two places (not a copy): gradients from both roles add up."""
        if self.cfg.tie_embeddings:
            self.head.weight = self.tok_emb.weight

    @torch.no_grad()
    def init_weights(self, seed: int = 0, std: float = 0.02) -> None:
        """GPT-2 style: N(0, std) matrices, N(0, std/sqrt(2L)) for projections into the residual stream,
        zero biases, unit norm gains."""
        g = torch.Generator(device=self.tok_emb.weight.device).manual_seed(seed)
        out_std = std / math.sqrt(2 * self.cfg.n_layers)
        init_linear(self.tok_emb, std, g)                # draws in registration order: the seed fixes all
        if self.pos_emb is not None:
            init_linear(self.pos_emb, std, g)
        init_norm(self.emb_norm)
        for block in self.blocks:
            block.init_weights(std, out_std, g)
        init_norm(self.final_norm)
        if not self.cfg.tie_embeddings:                  # tied: the head is the embedding, already drawn
            init_linear(self.head, std, g)
        elif self.head.bias is not None:                 # ... but its bias is its own
            nn.init.zeros_(self.head.bias)

    def moe_layers(self) -> list[MoE]:
        return [b.ffn for b in self.blocks if isinstance(b.ffn, MoE)]

    def moe_losses(self) -> dict[str, torch.Tensor]:
        """Load-balancing and z-loss of the last training forward, averaged over the MoE layers (as
        transformers averages them), and the regulariser sum_layers-mean of coef * loss to add to the loss;
        empty for a dense model."""
        layers = [m for m in self.moe_layers() if m.aux_loss is not None]
        if not layers:
            return {}
        n = len(layers)
        return {"aux_loss": sum(m.aux_loss for m in layers) / n, "z_loss": sum(m.z_loss for m in layers) / n,
                "regularizer": sum(m.regularizer() for m in layers) / n}

    def attention_layers(self) -> list[Attention]:
        """The softmax-attention modules (Attention or MLA) of the layers that have one."""
        return [b.attn for b in self.blocks if hasattr(b, "attn")]

    def set_attention(self, impl: str = "sdpa", keep_probs: bool = False) -> None:
        """Choose the attention path ('sdpa' or 'explicit') and whether to keep probabilities for plots."""
        require(choice_problem("impl", impl, ATTENTION_IMPLS))   # a misspelt path must not fall back to SDPA
        for a in self.attention_layers():
            a.explicit, a.keep_probs, a.probs = impl == "explicit", keep_probs, None

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        cfg = self.cfg
        B, T = idx.shape                                 # idx: [B, T] token ids
        start = cache.pos if cache is not None else 0
        pos = torch.arange(start, start + T, device=idx.device)
        if cfg.position == "learned" and start + T > cfg.context_length:
            raise ValueError(f"sequence of {start + T} tokens exceeds context_length={cfg.context_length} "
                             f"(learned positions have no row for it)")
        x = self.tok_emb(idx)                            # [B, T, d_model]
        if cfg.embed_scale:
            x = x * torch.tensor(math.sqrt(cfg.d_model), dtype=x.dtype)
        if cfg.embed_multiplier != 1.0:                  # a Python scalar: autograd saves nothing for it
            x = x * cfg.embed_multiplier
        if self.pos_emb is not None:
            x = x + self.pos_emb(pos)
        elif cfg.position == "sinusoidal":
            x = x + sinusoidal_table(pos, cfg.d_model).to(x.dtype)
        if self.emb_norm is not None:
            x = self.emb_norm(x)
        if cfg.embed_dropout:
            x = F.dropout(x, cfg.dropout, self.training)
        kinds = cfg.layer_ropes
        tables = {None: None}   # only the table sets some layer uses are built (and saved for backward)
        if "global" in kinds:
            tables["global"] = model_rope_tables(cfg, pos, start + T)   # cos, sin [T, r] each
        if "local" in kinds:
            tables["local"] = tables_from(pos, plain_inv_freq(cfg.rotary_dim, cfg.rope_local_base, pos.device))
        chosen = Chosen() if cfg.sparse_attention else None   # the indexer's choice, for shared layers
        for i, block in enumerate(self.blocks):
            x = block(x, pos, tables[kinds[i]], cache.layers[i] if cache is not None else None, chosen)
        if self.final_norm is not None:
            x = self.final_norm(x)
        logits = self.head(x)                            # [B, T, vocab]
        if cfg.logit_scale != 1.0:                       # a scalar multiply: autograd saves nothing for it
            logits = logits * cfg.logit_scale
        if cfg.logit_softcap is not None:
            logits = cfg.logit_softcap * torch.tanh(logits / cfg.logit_softcap)
        if cache is not None:
            cache.pos += T
        return logits


def build_model(cfg: ModelConfig, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
                seed: int = 0, init: bool = True) -> DecoderLM:
    """Build on meta (free), then, unless device is 'meta', allocate on `device` and initialise once.
    init=False allocates straight in `dtype` and leaves the values unset, for a state dict to be loaded."""
    with torch.device("meta"):
        model = DecoderLM(cfg)
    if not init:
        model.to(dtype)
    if torch.device(device).type != "meta":
        model.to_empty(device=device)
        model.tie()
        if init:
            model.init_weights(seed)
    model.to(dtype)
    model.tie()
    return model
