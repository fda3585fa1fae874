"""The block diagram's DOT follows the config: layout, norm placement, gated FFN, GQA, QK-norm, soft-caps."""
import re

import pytest

from app.diagram import block_dot
from engine.config import ModelConfig
from engine.layers.block import block_norm_count
from engine.presets import PRESETS

BASE = ModelConfig(vocab_size=100, context_length=32, d_model=64, n_layers=2, n_heads=4)


def node_labels(dot: str) -> list[str]:
    return re.findall(r'\[label="([^"]*)"', dot)



@pytest.mark.parametrize("placement", ["pre", "post", "sandwich"])
@pytest.mark.parametrize("layout", ["serial", "parallel"])
@pytest.mark.parametrize("shared", [False, True])
def test_norm_nodes_match_the_block(placement, layout, shared):
    cfg = BASE.replace(norm_placement=placement, block=layout, parallel_shared_norm=shared, final_norm=False)
    dot = block_dot(cfg)
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    labels = node_labels(dot)
    norms = [lab for lab in labels if "LayerNorm" in lab and not lab.startswith(("final", "embedding"))]
    assert len(norms) == block_norm_count(cfg)
    assert ("sum" in dot) == (layout == "parallel")
    assert ("post-attn" in dot) == (placement == "sandwich")


def test_serial_and_parallel_differ():
    assert block_dot(BASE) != block_dot(BASE.replace(block="parallel"))


def test_gated_ffn_has_a_gate_and_product():
    dense, gated = block_dot(BASE), block_dot(BASE.replace(ffn="swiglu"))
    assert "gate" not in dense and "b_gate" in gated and '"×"' in gated
    assert "gated FFN (swiglu)" in gated and "dense FFN (gelu_tanh)" in dense


def test_attention_variants_show():
    gqa = block_dot(BASE.replace(n_kv_heads=2))
    assert "Attention (GQA-2)" in gqa and "4 q heads, 2 kv heads" in gqa
    assert "Attention (MQA)" in block_dot(BASE.replace(n_kv_heads=1))
    assert "q_norm" in block_dot(BASE.replace(qk_norm=True)) and "q_norm" not in block_dot(BASE)
    capped = block_dot(BASE.replace(attn_softcap=50.0, logit_softcap=30.0))
    assert "50·tanh(s/50)" in capped and "30·tanh(z/30)" in capped
    assert "RoPE" in block_dot(BASE.replace(position="rope")) and "RoPE" not in block_dot(BASE)
    assert "window 8" in block_dot(BASE.replace(attn_window=8, global_every=2))


def test_every_preset_draws():
    for name, p in PRESETS.items():
        dot = block_dot(p.config)
        assert dot.count("{") == dot.count("}"), name
        assert f"× {p.config.n_layers}" in dot


def test_widths_have_thousands_separators():
    labels = " ".join(node_labels(block_dot(PRESETS["llama-3-8b"].config)))
    for text in ("4,096→14,336", "14,336→4,096", "4,096→1,024", "128,256 × 4,096", "4,096 × 128,256"):
        assert text in labels, text


def test_moe_block_draws_the_router_choosing_k_of_e_and_the_shared_expert():
    dot = block_dot(PRESETS["qwen1.5-moe-a2.7b"].config)
    assert "keep top 4" in dot and "4 of 60 routed experts" in dot and "1 shared expert(s) × sigmoid gate" in dot
    assert "d_ff 1,408 each" in dot and "b_up" not in dot        # no dense FFN drawn in its place
    mixed = block_dot(PRESETS["mixtral-8x7b"].config.replace(moe_first_dense=1))
    assert "MoE in 31 of 32 layers" in mixed and "2 of 8 routed experts" in mixed
    every_other = PRESETS["mixtral-8x7b"].config.replace(ffn_types=tuple("dense moe".split()) * 16)
    assert "MoE in 16 of 32 layers" in block_dot(every_other)      # ffn_types places the MoE layers


def test_circles_hold_one_symbol():
    """A circle grows around its label: the MoE's "Σ weight × expert" in one was the biggest node of the block.
    Circles are for the one-symbol joins (+, ×); anything longer is a box."""
    for name, p in PRESETS.items():
        circles = re.findall(r'\[label="([^"]*)", shape=circle', block_dot(p.config))
        assert circles and all(len(label) == 1 for label in circles), (name, circles)


def test_the_block_alone_leaves_out_embeddings_and_head():
    cfg = PRESETS["llama-3-8b"].config
    alone = block_dot(cfg, whole=False)
    assert "token embedding" not in alone and "output head" not in alone and "x (residual stream)" in alone
    assert alone.count("{") == alone.count("}") and "transformer block (serial, pre-norm)" in alone


def test_hybrid_layouts_draw_their_kinds():
    """A hybrid draws one layer in detail (an attention layer when there is one) and counts every kind; a
    recurrent mixer is a box of its kind's own summary, a one-branch layer skips the missing branch."""
    from engine.layers.mixers import MIXERS
    from tests.hybrid_cases import hybrid_configs
    for name, cfg in hybrid_configs().items():
        dot = block_dot(cfg)
        assert dot.count("{") == dot.count("}"), name
        assert f"block × {cfg.n_layers} of" in dot and "drawn: a" in dot, name
        recurrent = {MIXERS[k].label for spec in cfg.layer_specs for k in spec.mixers if MIXERS[k].recurrent}
        assert recurrent and all(label in dot for label in recurrent), name
    only_gdn = block_dot(hybrid_configs()["learned positions, no attention"])
    assert "q_proj" not in only_gdn and "delta rule: a 4x4 state per value head" in only_gdn


def test_llama4_diagram_shows_chunks_temperature_and_the_gain_free_qk_norm():
    """Llama 4's attention box names what makes it Llama 4: chunked local layers, the NoPE layers' query
    temperature and the QK-norm without gain on the rotating layers; the mask says chunk."""
    from app.diagram import attention_label
    cfg = PRESETS["llama-4-scout-17b-16e"].config
    labels = attention_label(cfg) + " ".join(node_labels(block_dot(cfg)))
    assert "chunked layers: own block of 8,192 only" in labels
    assert "q × (1 + 0.1·ln(1 + ⌊(p+1)/8,192⌋)) on NoPE layers" in labels
    assert "QK-norm on q and k (no gain, RoPE layers only)" in labels
    assert "causal mask + chunk" in labels
