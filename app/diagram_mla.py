"""The attention box of an MLA block (DeepSeek-V2/V3) for app/diagram.py, drawn from engine.layers.mla's
mla_layout: the query path (down, RMSNorm, up; or one full projection), the key/value down-projection to the
latent and the shared rotary key, the latent's RMSNorm, the up-projection to per-head keys and values, and the
two tensors a decode step caches (latent and rotary key), in their own box.
"""
from __future__ import annotations

from app.charts import COLORS, MEMORY_COLORS
from engine.config import ModelConfig
from engine.layers.mla import MLALayout
from engine.layers.norm import NORMS

CACHE_COLOR = MEMORY_COLORS["kv_cache"]


def mla_label(m: MLALayout) -> list[str]:
    """The first lines of the attention box's title: the kind, the heads and their widths."""
    return [f"Attention (MLA), {m.heads:,} heads",
            f"q·k over {m.nope_dim + m.rope_dim:,} = {m.nope_dim:,} + {m.rope_dim:,} rotary, v {m.v_dim:,}"]


def _shape(m: MLALayout, name: str, d_in: int, d_out: int) -> str:
    """in→out of a projection, split into heads × per-head width where the module splits it."""
    heads_out = {"q_proj": m.nope_dim + m.rope_dim, "q_b": m.nope_dim + m.rope_dim}
    out = (f"{m.heads:,}×{heads_out[name]:,}" if name in heads_out else
           f"{m.kv_lora_rank:,} + {m.rope_dim:,}" if name == "kv_a" else
           f"{m.heads:,}×({m.nope_dim:,} + {m.v_dim:,})" if name == "kv_b" else f"{d_out:,}")
    return (f"{m.heads:,}×{m.v_dim:,}" if name == "o_proj" else f"{d_in:,}") + "→" + out


def mla_attention(d, p: str, cfg: ModelConfig, m: MLALayout, cluster_label: str, norm_color: str) -> tuple[str, str]:
    """Draw the MLA box into the DOT writer `d` (node ids prefixed `p`); returns (entry, exit) node ids."""
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
        with d.cluster(f"{p}cache", f"cached per token: {latent_w + rot_w:,} values (latent + rotary key)"):
            latent = d.node(f"{p}latent", f"{latent_what} c\\n{latent_w:,}", CACHE_COLOR, shape="cylinder")
            rot = d.node(f"{p}k_rot", f"{rot_what} k_rot\\n{rot_w:,}, shared by all heads", CACHE_COLOR,
                         shape="cylinder")
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
        d.chain(s, d.node(f"{p}mask", "causal mask"), d.node(f"{p}softmax", "softmax"), d.node(f"{p}pv", "× v"))
        d.edge(kv_b, f"{p}pv", f"v {m.v_dim:,}")
        d.edge(f"{p}pv", box("o_proj", "out"))
    d.node(f"{p}attn_in", "", shape="point")
    d.edge(f"{p}attn_in", q_in)
    d.edge(f"{p}attn_in", kv_a)
    return f"{p}attn_in", f"{p}o_proj"
