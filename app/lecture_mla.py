"""The Lecture section "MLA: cache the latent, not the heads": KV-cache bytes per token under MHA, GQA, MQA and MLA
(latent and expanded) for the current config's layers, heads and head width (engine.lecture.latent_cache), and
the cache against context length. The latent's width, the rotary key's width and the dtype are in the URL
(`mla_rank`, `mla_rope`, `mla_dtype`; app.state.VIEW_PARAMS), so a slide can link to exactly this view.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from app import present, url_view
from app.budget_view import token_grid
from app.charts.lecture import latent_cache_figure
from app.lecture_kit import chart, metrics
from app.state import current_config
from app.sweep_view import SweepSpec, spec_to_params
from app.text import md
from engine import lecture
from engine.limits import MAX_INT
from engine.units import fmt_bytes

TRADEOFFS = Path(__file__).resolve().parents[1] / "pages" / "tradeoffs.py"
DTYPES = ("bf16", "fp16", "fp32")
RANK, ROPE = url_view.integer("mla_rank", 1, MAX_INT), url_view.integer("mla_rope", 2, MAX_INT)
DTYPE = url_view.choice("mla_dtype", DTYPES)
URL_KEYS = (RANK.param, ROPE.param, DTYPE.param)


def render() -> None:
    cfg = current_config()
    r0, dr0 = lecture.mla_sizes(cfg)
    c = st.columns(3)
    own = "this config's" if cfg.mla else "DeepSeek-V2's ratio: 4 × head width"
    rank = url_view.bound(f"lec_mla_rank_{r0}", RANK, r0, c[0].number_input, "latent width kv_lora_rank", 1,
                          MAX_INT, help=f"What MLA caches per token and layer, besides the rotary key. Starts at "
                                        f"{own} ({r0:,}).")
    rope = url_view.bound(f"lec_mla_rope_{dr0}", ROPE, dr0, c[1].number_input, "rotary key qk_rope_head_dim", 2,
                          MAX_INT, step=2, help=f"One rotary key shared by every head, cached beside the latent. "
                                                f"Starts at {dr0:,}" + ("." if cfg.mla else " (half a head)."))
    dtype = url_view.bound("lec_mla_dtype", DTYPE, "bf16", c[2].selectbox, "dtype", DTYPES)
    r = lecture.latent_cache(cfg, token_grid(cfg.context_length), dtype=dtype, kv_lora_rank=rank, rope_dim=rope)
    metrics(*((k.kind, f"{fmt_bytes(k.per_token)}/token",
               f"{k.per_token:,} bytes per token: {r.n_layers} layers × {k.values:,} values × "
               f"{k.per_token // (r.n_layers * k.values)} bytes", f"{k.vs_mha:.2%} of MHA") for k in r.kinds))
    latent = next(k for k in r.kinds if k.kind == "MLA latent")
    expanded = next(k for k in r.kinds if k.kind == "MLA expanded")
    st.caption(f"{md(cfg.name)}: {r.n_layers} layers, {r.n_heads} query heads of {r.head_dim}. GQA and MQA save by "
               f"letting heads share keys and values. MLA keeps one key and value per head, yet caches only a "
               f"latent of {r.kv_lora_rank:,} numbers and a rotary key of {r.rope_dim:,} per token and layer; a "
               f"decode step rebuilds every head's key and value from them. The latent costs what GQA with "
               f"{r.gqa_groups:g} KV heads would; the expanded keys and values it stands for are "
               f"{expanded.per_token / latent.per_token:.1f}× larger.")
    chart(latent_cache_figure(r), "mla")
    if cfg.mla and not present.is_present():
        values = ",".join(str(max(1, r0 * m // 4)) for m in (1, 2, 4, 8))
        st.page_link(TRADEOFFS, label="Sweep kv_lora_rank on the Trade-offs page (KV cache vs parameters)",
                     icon=":material/ssid_chart:", query_params=spec_to_params(SweepSpec(knob="kv_lora_rank",
                                                                                          values=values)))
