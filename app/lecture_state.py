"""The Lecture section "A fixed state instead of a growing cache": the current config's layers as softmax attention
everywhere, Gated DeltaNet everywhere, Mamba-2 everywhere and a hybrid (its own layout, else 3:1), in bytes per
sequence and FLOPs per decoded token against context (engine.lecture.fixed_state). The dtype is in the URL
(`state_view_dtype`)."""
from __future__ import annotations

import streamlit as st

from app import export, url_view
from app.charts.lecture import fixed_state_figure
from app.lecture_kit import chart, metrics
from app.state import current_config
from app.text import md
from engine import lecture
from engine.lecture.state import MARKS
from engine.units import fmt_bytes, fmt_flops

DTYPES = ("bf16", "fp16", "fp32")
DTYPE = url_view.choice("state_view_dtype", DTYPES)
URL_KEYS = (DTYPE.param,)
GRID = tuple(sorted({round(2 ** (k / 4)) for k in range(0, 4 * 20 + 1)}))   # 1 .. 1,048,576 tokens, log-spaced
SHORT = {4_096: "4K", 131_072: "128K", 1_048_576: "1M"}


def render() -> None:
    cfg = current_config()
    dtype = url_view.bound("lec_state_dtype", DTYPE, "bf16", st.columns(4)[0].selectbox, "dtype", DTYPES,
                           help="The dtype of the KV cache and of the recurrent state (vLLM's convention).")
    r = lecture.fixed_state(cfg, GRID, dtype=dtype)
    metrics(*((f"{k.kind}, at 1M tokens", fmt_bytes(k.at_marks[-1]),
               f"Per sequence: KV cache of {k.attention_layers} attention layers ({fmt_bytes(k.kv_per_token)} per "
               f"token) + recurrent state {fmt_bytes(k.state)}. At 4K: {fmt_bytes(k.at_marks[0])}, at 128K: "
               f"{fmt_bytes(k.at_marks[1])}.", f"{fmt_flops(k.flops_at_marks[-1])} per decoded token")
              for k in r.kinds))
    attn, gdn, mamba, _ = r.kinds
    st.caption(md(
        f"{cfg.name}'s {r.n_layers} layers, {dtype}. Softmax attention keeps every past key and value, "
        f"{fmt_bytes(attn.kv_per_token)} more per token, and rereads them all for each new token. Gated DeltaNet "
        f"(linear attention) folds the past into a fixed matrix per head ({fmt_bytes(gdn.state)} for all its "
        f"layers), Mamba-2 into a fixed state per head of head width × d_state ({fmt_bytes(mamba.state)}), so "
        "memory and decode work stay flat; they recall less exactly, which is why hybrids keep a few attention "
        "layers."))
    chart(fixed_state_figure(r), "state")
    head = ["layout"] + [f"bytes at {SHORT.get(t, f'{t:,}')}" for t in MARKS] + [
        f"FLOPs/token at {SHORT.get(t, f'{t:,}')}" for t in MARKS]
    rows = [[k.kind, *map(fmt_bytes, k.at_marks), *map(fmt_flops, k.flops_at_marks)] for k in r.kinds]
    st.markdown(export.markdown_table(head, rows))
