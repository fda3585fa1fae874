"""Pure figure builders: engine results -> Plotly figures, one module per page family. No Streamlit here, so tests
call them directly.

  design.py       where the parameters live (treemap)
  activations.py  activation curves and gated surface; live statistics (residual RMS, entropy, attention map)
  budgets.py      memory per precision policy, KV cache vs context, FLOPs split, roofline
  compare.py      grouped bars of pinned configs
  latency.py      measured latency, throughput and decode-step curves
  training.py     loss, optimizer diagnostics, training speed
  lecture.py      one figure per worked example of the Lecture page
  sweep.py        trade-off sweeps: small multiples (a panel per metric) and the Pareto chart

This module holds what they share: one colour per component everywhere (COLORS), the memory and series palettes,
and `layout`. Every axis names its unit.
"""
from __future__ import annotations

import pandas  # noqa: F401  loaded in full before plotly peeks at sys.modules (a cold server can race on it)
import plotly.graph_objects as go

# One colour per model component, used by every page.
COLORS: dict[str, str] = {
    "embeddings": "#4C78A8",
    "positions": "#72B7B2",
    "attention": "#F58518",
    "ffn": "#54A24B",
    "norms": "#B279A2",
    "output_head": "#E45756",
}
# One colour per memory category (training state and inference caches).
MEMORY_COLORS: dict[str, str] = {
    "weights": "#4C78A8",
    "grads": "#E45756",
    "optimizer": "#F58518",
    "master": "#B279A2",
    "activations": "#54A24B",
    "kv_cache": "#72B7B2",
    "logits": "#9D755D",
}
# One colour per layer kind on the layer map (engine/layers/layer_map.py keys): softmax attention keeps the
# attention orange, a recurrent mixer its own hue, a missing branch grey; a key not listed takes KIND_FALLBACK.
MIXER_COLORS: dict[str, str] = {"full": COLORS["attention"], "sliding": "#FFBF79", "chunked": "#C96A0E",
                                "gdn": "#4C78A8", "mamba2": "#9467BD", "mamba1": "#17BECF",
                                "none": "#D9D9D9"}
FFN_KIND_COLORS: dict[str, str] = {"dense": COLORS["ffn"], "moe": "#1F6F3A", "none": "#D9D9D9"}
KIND_FALLBACK = ["#9467BD", "#17BECF", "#8C564B", "#E377C2"]


def kind_color(key: str, table: dict[str, str]) -> str:
    """A layer kind's colour; keys of two mixers side by side ('full+gdn') not in the table take a fallback."""
    return table.get(key) or KIND_FALLBACK[sum(map(ord, key)) % len(KIND_FALLBACK)]


# Which colour group each engine parameter component belongs to.
COMPONENT_GROUP: dict[str, str] = {
    "token_embedding": "embeddings", "positions": "positions",
    "attention_q": "attention", "attention_k": "attention", "attention_v": "attention", "attention_o": "attention",
    "qk_norm": "attention", "attention_sinks": "attention", "indexer": "attention", "ffn": "ffn", "norms": "norms",
    "output_head": "output_head",
    "router": "ffn", "shared_experts": "ffn", "routed_experts": "ffn",   # an MoE layer's FFN, split three ways
    "attention_gate": "attention",
    # recurrent mixers (engine/layers/mixers.py) take the colour of the token mixer they replace
    "gdn_in_proj": "attention", "gdn_conv": "attention", "gdn_gates": "attention", "gdn_out_proj": "attention",
    "ssm_in": "attention", "ssm_conv": "attention", "ssm_dt_bc": "attention", "ssm_heads": "attention",
    "ssm_norm": "attention", "ssm_out": "attention",
    "kda_in_proj": "attention", "kda_conv": "attention", "kda_gates": "attention", "kda_out_proj": "attention",
    "lightning_in_proj": "attention", "lightning_norm": "attention", "lightning_out_proj": "attention",
}
LABELS: dict[str, str] = {
    "token_embedding": "token embedding", "positions": "learned positions", "attention_q": "q projection",
    "attention_k": "k projection", "attention_v": "v projection", "attention_o": "o projection",
    "qk_norm": "QK-norm", "attention_sinks": "attention sinks", "indexer": "lightning indexer",
    "ffn": "feed-forward", "norms": "norms",
    "output_head": "output head",
    "router": "router", "shared_experts": "shared experts", "routed_experts": "routed experts",
    "attention_gate": "attention output gate", "gdn_in_proj": "Gated DeltaNet in_proj",
    "gdn_conv": "Gated DeltaNet conv", "gdn_gates": "Gated DeltaNet decay, write gates and norm",
    "gdn_out_proj": "Gated DeltaNet out_proj",
    "ssm_in": "Mamba in_proj", "ssm_conv": "Mamba conv", "ssm_dt_bc": "Mamba x_proj and dt_proj",
    "ssm_heads": "Mamba A, D and dt bias", "ssm_norm": "Mamba norms", "ssm_out": "Mamba out_proj",
    "kda_in_proj": "KDA q, k, v and beta projections", "kda_conv": "KDA conv",
    "kda_gates": "KDA decay and output gates, norm", "kda_out_proj": "KDA o_proj",
    "lightning_in_proj": "lightning qkv and output gate", "lightning_norm": "lightning norm",
    "lightning_out_proj": "lightning out_proj",
    "embeddings": "embeddings", "attention": "attention", "output_head_group": "output head",
}
FONT = dict(size=14)
ACTIVATION_COLORS = {"relu": "#4C78A8", "gelu": "#F58518", "gelu_tanh": "#E45756", "silu": "#54A24B",
                     "reglu": "#9D755D", "geglu": "#B279A2", "geglu_tanh": "#FF9DA6", "swiglu": "#17BECF",
                     "swiglu_clamped": "#8C564B"}
# One colour per compared series, from the shared palette, ordered so that neighbours contrast on a projector
# (the palette's first two, blue and teal, are hard to tell apart as thin lines).
SERIES_COLORS = [COLORS[k] for k in ("embeddings", "attention", "ffn", "output_head", "norms", "positions")]


def series_color(i: int) -> str:
    return SERIES_COLORS[i % len(SERIES_COLORS)]


def layout(fig: go.Figure, title: str, **kw) -> go.Figure:
    """The shared title, font and margins."""
    fig.update_layout(title=title, font=FONT, margin=dict(l=10, r=10, t=50, b=10), **kw)
    return fig
