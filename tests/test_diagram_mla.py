"""The MLA block diagram: engine.layers.mla.mla_layout against the built module (every projection's shape and bias,
the latent norms) and a decode step's cache (the two cached tensors and their widths); the DOT draws exactly
those projections, the latent norm, the shared rotary key and a cache box holding the latent and the rotary key."""
import re

import pytest
import torch

from app.diagram import block_dot
from engine.config import ModelConfig
from engine.layers.block import block_layout
from engine.layers.mla import mla_layout
from engine.model import KVCache, build_model
from engine.presets import PRESETS

TINY = ModelConfig(vocab_size=97, context_length=16, d_model=32, n_layers=2, n_heads=4, position="rope",
                   norm="rmsnorm", norm_bias=False, ffn="swiglu", d_ff=48, kv_lora_rank=12, qk_rope_head_dim=6,
                   qk_nope_head_dim=10, v_head_dim=14)


def labels(dot: str) -> dict[str, str]:
    return dict(re.findall(r'^\s*(\w+) \[label="([^"]*)"', dot, re.M))


def edges(dot: str) -> set[tuple[str, str]]:
    return set(re.findall(r"^\s*(\w+) -> (\w+)", dot, re.M))


def cluster_nodes(dot: str, name: str) -> tuple[str, set[str]]:
    """(label, node ids) of one cluster (clusters here hold no nested clusters)."""
    body = dot.split(f"subgraph cluster_{name} {{", 1)[1].split("\n  }", 1)[0]
    return re.search(r'label="([^"]*)"', body).group(1), set(re.findall(r"^\s*(\w+) \[label", body, re.M))


@pytest.mark.parametrize("q_lora, bias", [(None, False), (20, False), (20, True)])
def test_layout_matches_the_built_module_and_its_latent_cache(q_lora, bias):
    cfg = TINY.replace(q_lora_rank=q_lora, bias=bias)
    lay = mla_layout(cfg)
    assert block_layout(cfg).mla == lay
    model = build_model(cfg, seed=0).eval()
    attn = model.blocks[0].attn
    built = {name: m for name, m in attn.named_children() if isinstance(m, torch.nn.Linear)}
    assert set(built) == {p.name for p in lay.projections}
    for p in lay.projections:
        assert tuple(built[p.name].weight.shape) == (p.d_out, p.d_in), p.name
        assert (built[p.name].bias is not None) == p.bias, p.name
    for name, width in lay.norms:
        assert tuple(getattr(attn, name).weight.shape) == (width,), name
    cache = KVCache(cfg.n_layers)
    with torch.no_grad():
        model(torch.arange(5).view(1, 5), cache)
    layer = cache.layers[0]   # the latent cache: the normed latent and the rotated key, one "head" each
    assert [(t.shape[1], t.shape[-1]) for t in (layer.k, layer.v)] == [(1, w) for _, w in lay.cached]


def test_plain_attention_has_no_mla_layout():
    assert block_layout(TINY.replace(kv_lora_rank=None, position="learned")).mla is None


def test_deepseek_v3_diagram_draws_the_latent_path():
    cfg = PRESETS["deepseek-v3"].config
    dot = block_dot(cfg)
    lab, e = labels(dot), edges(dot)
    assert "b_k" not in lab and "b_v" not in lab and "b_q" not in lab        # no plain k/v/q projections
    assert lab["b_q_a"] == "q_a (down)\\n7,168→1,536" and lab["b_q_norm"] == "RMSNorm 1,536"
    assert lab["b_q_b"] == "q_b (up)\\n1,536→128×192"
    assert lab["b_kv_a"] == "kv_a (down)\\n7,168→512 + 64" and lab["b_kv_norm"] == "RMSNorm 512"
    assert lab["b_kv_b"] == "kv_b (up)\\n512→128×(128 + 128)"
    assert lab["b_o_proj"] == "o_proj (out)\\n128×128→7,168"
    # the down-projection splits: the latent through its norm into the cache and the up-projection; the rotary
    # key through RoPE into the cache and, broadcast to every head, into the keys
    assert {("b_attn_in", "b_q_a"), ("b_q_a", "b_q_norm"), ("b_q_norm", "b_q_b"), ("b_attn_in", "b_kv_a"),
            ("b_kv_a", "b_kv_norm"), ("b_kv_norm", "b_latent"), ("b_latent", "b_kv_b"), ("b_kv_a", "b_k_rope"),
            ("b_k_rope", "b_k_rot"), ("b_k_rot", "b_keys"), ("b_kv_b", "b_keys"), ("b_kv_b", "b_pv")} <= e
    title, cached = cluster_nodes(dot, "b_cache")
    assert cached == {"b_latent", "b_k_rot"} and "576 values" in title   # 512 + 64 per token and layer
    assert "512" in lab["b_latent"] and "64" in lab["b_k_rot"]
    assert "Attention (MLA), 128 heads" in dot and "q·kᵀ / √192" in dot


def test_full_query_projection_without_q_lora_rank():
    dot = block_dot(TINY.replace(q_lora_rank=None))
    lab = labels(dot)
    assert lab["b_q_proj"] == "q_proj (full)\\n32→4×16" and "b_q_a" not in lab and "b_q_norm" not in lab
    assert ("b_attn_in", "b_q_proj") in edges(dot)
    assert cluster_nodes(dot, "b_cache")[0].startswith("cached per token: 18 values")   # 12 + 6


def test_every_drawn_projection_is_one_of_the_layout():
    for cfg in (PRESETS["deepseek-v3"].config, TINY, TINY.replace(q_lora_rank=8)):
        lay, lab = mla_layout(cfg), labels(block_dot(cfg))
        drawn = {n.removeprefix("b_") for n, text in lab.items() if re.match(r"\w+ \((down|up|full|out)\)", text)}
        assert drawn == {p.name for p in lay.projections}


@pytest.mark.parametrize("preset, pairs", [("deepseek-v3.2", "halves"), ("glm-5", "adjacent pairs")])
def test_the_indexer_rope_node_says_how_its_preset_rotates(preset, pairs):
    """GLM-5's indexer rotates adjacent pairs (index_rope_interleave), DeepSeek-V3.2's the two halves."""
    assert labels(block_dot(PRESETS[preset].config))["b_idx_rope"] == f"RoPE on the first 64 dims\\n({pairs})"
