"""Exact closed-form parameter counts, per component, equal to the built model's `parameters()`.

A thin sum: each layer family (engine/layers/*) holds its own closed form; this module adds them over layers.

Per layer, with d = d_model, A = n_heads*head_dim, K = kv_heads*head_dim, f = d_ff:
  attention   q: d*A (+A)   k, v: d*K (+K each)   o: A*d (+d)        (q/k/v biases: bias or qkv_bias; o: bias)
  QK-norm     2 norms of width head_dim
  sinks       H (one learned logit per query head)
  MLA         latent projections and norms (engine/layers/mla.py); with sparse attention each layer running
              its own lightning indexer adds `indexer` (engine/layers/indexer.py)
  gate        d*A or d*H (an attention output gate)
  other mixers  each kind's own components (engine/layers/mixers.py MIXERS, e.g. gdn_in_proj ... in gdn.py);
              a layer holds the mixers its layer_types entry names, and the FFN its ffn_types entry names
  FFN         dense 2*d*f (+f+d)   gated 3*d*f (+2f+d); an MoE layer instead has router, shared_experts and
              routed_experts (engine/layers/moe.py)
  norms       1-4 per block (placement, layout), plus embedding and final norms
Model: token embedding V*d, learned positions T*d, output head V*d unless tied (one shared Parameter), plus V
with head_bias (never tied).
Multi-token-prediction modules (mtp_depth, engine/budget/mtp.py) are reported as `mtp`, beside the total.
Active: what one token uses: everything except the routed experts it is not sent to (k of E per MoE layer);
equal to total for a dense model.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.budget.mtp import mtp_params
from engine.config import ModelConfig
from engine.layers.block import block_params
from engine.layers.mixers import layer_groups, mixer_components
from engine.layers.moe import moe_skipped_params
from engine.layers.norm import norm_params
from engine.layers.position import position_params

COMPONENTS = (("token_embedding", "positions") + mixer_components()
              + ("ffn", "router", "shared_experts", "routed_experts", "norms", "output_head"))


@dataclass(frozen=True)
class ParamCount:
    components: dict[str, int]   # every name in COMPONENTS, summed over all layers
    per_layer: int               # parameters in the first transformer block
    total: int                   # unique parameters (a tied matrix counts once)
    non_embedding: int           # total minus token embedding, positions and an untied output head
    tying_saves: int             # V*d: what sharing the embedding with the head saves (or would save)
    tied: bool
    active: int                  # parameters one token uses: total minus the routed experts it skips
    active_non_embedding: int
    mtp: int = 0                 # multi-token-prediction modules, beside the total, never in it (budget/mtp.py)

    def as_dict(self) -> dict:
        """The CLI's keys: a count of parameters ends in _params, as in `sweep` and `plan` (components: params)."""
        return {"total_params": self.total, "non_embedding_params": self.non_embedding, "active_params": self.active,
                "active_non_embedding_params": self.active_non_embedding, "per_layer_params": self.per_layer,
                "tying_saves_params": self.tying_saves, "tied": self.tied, "components": dict(self.components),
                "mtp_params": self.mtp}


def count_params(cfg: ModelConfig) -> ParamCount:
    d, V = cfg.d_model, cfg.vocab_size
    comps = dict.fromkeys(COMPONENTS, 0)
    n_moe = 0
    for spec, n in layer_groups(cfg):   # each distinct layer once, times how many there are
        for name, count in block_params(cfg, spec).items():
            comps[name] += n * count
        n_moe += n if spec.ffn == "moe" else 0
    skipped = n_moe * moe_skipped_params(cfg) if n_moe else 0
    comps["token_embedding"] = V * d
    comps["positions"] = position_params(cfg)
    comps["norms"] += (int(cfg.embed_norm) + int(cfg.final_norm)) * norm_params(cfg, d)
    comps["output_head"] = (0 if cfg.tie_embeddings else V * d) + (V if cfg.head_bias else 0)
    total = sum(comps.values())
    head = 0 if cfg.tie_embeddings else comps["output_head"]   # tied: only a head bias is left, counted as a layer
    non_embedding = total - comps["token_embedding"] - comps["positions"] - head
    return ParamCount(components=comps, per_layer=sum(block_params(cfg, cfg.layer_spec(0)).values()), total=total,
                      non_embedding=non_embedding, tying_saves=V * d, tied=cfg.tie_embeddings,
                      active=total - skipped, active_non_embedding=non_embedding - skipped, mtp=mtp_params(cfg))
