"""The attention box of an MLA block (DeepSeek-V2/V3) for app/diagram.py, drawn from engine.layers.mla's
mla_layout: the query path (down, RMSNorm, up; or one full projection), the key/value down-projection to the
latent and the shared rotary key, the latent's RMSNorm, the up-projection to per-head keys and values, and the
two tensors a decode step caches (latent and rotary key), in their own box. With sparse attention (DeepSeek-V3.2,
GLM-5) the lightning indexer from engine.layers.indexer's indexer_layout: its queries from the query latent, its
one key per token (cached beside the latent), the per-head weights, the score over every earlier key and the
top-k that masks MLA's softmax.
"""
from __future__ import annotations

from app.charts import COLORS, MEMORY_COLORS
from engine.config import ModelConfig
from engine.layers.indexer import IndexerLayout
from engine.layers.mla import MLALayout
from engine.layers.norm import NORMS

CACHE_COLOR = MEMORY_COLORS["kv_cache"]


def mla_label(m: MLALayout, ix: IndexerLayout | None = None) -> list[str]:
    """The first lines of the attention box's title: the kind, the heads and their widths."""
    kind = "MLA" if ix is None else f"MLA, sparse: top {ix.topk:,} keys by a lightning indexer"
    return [f"Attention ({kind}), {m.heads:,} heads",
            f"q·k over {m.nope_dim + m.rope_dim:,} = {m.nope_dim:,} + {m.rope_dim:,} rotary, v {m.v_dim:,}"]


def _shape(m: MLALayout, name: str, d_in: int, d_out: int) -> str:
    """in→out of a projection, split into heads × per-head width where the module splits it."""
    heads_out = {"q_proj": m.nope_dim + m.rope_dim, "q_b": m.nope_dim + m.rope_dim}
    out = (f"{m.heads:,}×{heads_out[name]:,}" if name in heads_out else
           f"{m.kv_lora_rank:,} + {m.rope_dim:,}" if name == "kv_a" else
           f"{m.heads:,}×({m.nope_dim:,} + {m.v_dim:,})" if name == "kv_b" else f"{d_out:,}")
    return (f"{m.heads:,}×{m.v_dim:,}" if name == "o_proj" else f"{d_in:,}") + "→" + out


def _indexer(d, p: str, ix: IndexerLayout, query: str, norm_color: str, shared: str) -> tuple[str, str, str]:
    """The lightning indexer's nodes (ids prefixed `p`idx_); returns (key, score, top-k) node ids."""
    c = COLORS["attention"]
    pairs = "adjacent pairs" if ix.interleave else "halves"
    q = d.node(f"{p}idx_q", f"indexer wq_b (queries)\\n{ix.query_latent:,}→{ix.heads:,}×{ix.head_dim:,}", c)
    d.edge(query, q, "query latent")
    k = d.node(f"{p}idx_k", f"indexer wk (one key)\\n{ix.d_model:,}→{ix.head_dim:,}", c)
    w = d.node(f"{p}idx_w", f"weights_proj\\n{ix.d_model:,}→{ix.heads:,} (a weight per head)", c)
    rope = d.node(f"{p}idx_rope", f"RoPE on the first {ix.rope_dim:,} dims\\n({pairs})")
    d.chain(k, d.node(f"{p}idx_k_norm", f"LayerNorm {ix.head_dim:,}", norm_color), rope)
    d.edge(q, rope)
    score = d.node(f"{p}idx_score", f"Σ_h w_h · ReLU(q_h·k / √{ix.head_dim:,})\\nover every earlier key")
    d.edge(w, score)
    d.edge(rope, score)
    top = d.node(f"{p}idx_top", f"keep the top {ix.topk:,} keys\\nof each query" + shared)
    d.edge(score, top)
    return rope, score, top


def mla_attention(d, p: str, cfg: ModelConfig, m: MLALayout, cluster_label: str, norm_color: str,
                  ix: IndexerLayout | None = None) -> tuple[str, str]:
    """Draw the MLA box into the DOT writer `d` (node ids prefixed `p`), with the lightning indexer `ix` when
    attention is sparse; returns (entry, exit) node ids."""
    c = COLORS["attention"]
    proj = {pr.name: pr for pr in m.projections}
    norm_width, norm = dict(m.norms), NORMS[cfg.norm].label

    def box(name: str, what: str) -> str:
        pr = proj[name]
        return d.node(f"{p}{name}", f"{name} ({what})\\n{_shape(m, name, pr.d_in, pr.d_out)}", c)

    with d.cluster(f"{p}attn", cluster_label):
        if "q_proj" in proj:
            q = box("q_proj", "full")
            q_in = q
        else:
            q_in = box("q_a", "down")
            q = box("q_b", "up")
            d.chain(q_in, d.node(f"{p}q_norm", f"{norm} {norm_width['q_norm']:,}", norm_color), q)
        d.chain(q, d.node(f"{p}q_rope", f"RoPE on each head's\\nlast {m.rope_dim:,} dims"))
        kv_a = box("kv_a", "down")
        kv_norm = d.node(f"{p}kv_norm", f"{norm} {norm_width['kv_norm']:,}", norm_color)
        d.edge(kv_a, kv_norm, f"latent {m.kv_lora_rank:,}")
        k_rope = d.node(f"{p}k_rope", "RoPE")
        d.edge(kv_a, k_rope, f"rotary key {m.rope_dim:,}")
        (latent_what, latent_w), (rot_what, rot_w) = m.cached
        if ix is not None:
            shared = "" if all(cfg.indexer_layers) else (
                f"\\n(in {sum(cfg.indexer_layers):,} of {cfg.n_layers:,} layers;\\nthe others reuse this choice)")
            idx_key, idx_score, idx_top = _indexer(d, p, ix, f"{p}q_norm", norm_color, shared)
        also = " and the indexer key" if ix is not None else ""
        with d.cluster(f"{p}cache", f"cached per token: {latent_w + rot_w:,} values (latent + rotary key){also}"):
            latent = d.node(f"{p}latent", f"{latent_what} c\\n{latent_w:,}", CACHE_COLOR, shape="cylinder")
            rot = d.node(f"{p}k_rot", f"{rot_what} k_rot\\n{rot_w:,}, shared by all heads", CACHE_COLOR,
                         shape="cylinder")
            if ix is not None:
                d.node(f"{p}idx_cache", f"indexer key\\n{ix.head_dim:,}: FP8 + scale, {ix.fp8_key_bytes:,} B",
                       CACHE_COLOR, shape="cylinder")
        if ix is not None:
            d.edge(idx_key, f"{p}idx_cache")
            d.edge(f"{p}idx_cache", idx_score, "earlier keys")
        d.edge(kv_norm, latent)
        d.edge(k_rope, rot)
        kv_b = box("kv_b", "up")
        d.edge(latent, kv_b)
        keys = d.node(f"{p}keys", f"k per head\\n[k_nope {m.nope_dim:,} | k_rot {m.rope_dim:,}]")
        d.edge(kv_b, keys, f"k_nope {m.nope_dim:,}")
        d.edge(rot, keys, "broadcast")
        scale = f"/ √{m.nope_dim + m.rope_dim:,}" if cfg.attn_scale is None else f"× {cfg.attn_scale:.4g}"
        s = d.node(f"{p}scores", f"q·kᵀ {scale}")
        d.edge(f"{p}q_rope", s)
        d.edge(keys, s)
        mask = d.node(f"{p}mask", "causal mask" if ix is None else f"causal mask ∩ top {ix.topk:,}")
        d.chain(s, mask, d.node(f"{p}softmax", "softmax"), d.node(f"{p}pv", "× v"))
        if ix is not None:
            d.edge(idx_top, mask, "kept keys")
        d.edge(kv_b, f"{p}pv", f"v {m.v_dim:,}")
        d.edge(f"{p}pv", box("o_proj", "out"))
    d.node(f"{p}attn_in", "", shape="point")
    d.edge(f"{p}attn_in", q_in)
    d.edge(f"{p}attn_in", kv_a)
    if ix is not None:
        d.edge(f"{p}attn_in", f"{p}idx_k")
        d.edge(f"{p}attn_in", f"{p}idx_w")
    return f"{p}attn_in", f"{p}o_proj"
