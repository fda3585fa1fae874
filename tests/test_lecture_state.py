"""'A fixed state instead of a growing cache' (engine/lecture/state.py): bytes per sequence against a real decode
step's cache tensors, decode FLOPs against the per-token formulas, the layouts (with_attention_layers), the
Qwen3-Next figures of issue 23, its chart and the Lecture section in AppTest."""
import pytest
import torch

from app.charts.lecture import fixed_state_figure
from engine.budget.flops import matmul_params
from engine.config import ModelConfig
from engine.layers.layer_map import attention_positions, with_attention_layers
from engine.lecture import fixed_state
from engine.model import KVCache, build_model
from engine.presets import PRESETS

LECTURE = "pages/lecture.py"
TINY = ModelConfig(vocab_size=50, context_length=64, d_model=24, n_layers=4, n_heads=4, n_kv_heads=2,
                   position="rope", ffn="swiglu", d_ff=32, norm="rmsnorm", bias=False, gdn_chunk=4)


@torch.no_grad()
def cache_bytes(cfg: ModelConfig, tokens: int) -> int:
    """Bytes of the decode cache's tensors (KV of attention layers, conv window and state of recurrent ones) after
    prefilling tokens - 1 positions and decoding one, fp32."""
    model = build_model(cfg, seed=0).eval()
    idx = torch.randint(0, cfg.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(0))
    cache = KVCache(cfg.n_layers)
    model(idx[:, :-1], cache)
    model(idx[:, -1:], cache)
    return cache.nbytes()


def test_bytes_per_sequence_equal_the_decode_cache_tensors():
    tokens = (5, 12, 30)
    r = fixed_state(TINY, tokens, dtype="fp32", marks=(9,))
    assert [k.kind for k in r.kinds] == ["softmax attention, every layer", "Gated DeltaNet, every layer",
                                         "Mamba-2, every layer", "hybrid: 1 attention of 4"]
    assert [k.attention_layers for k in r.kinds] == [4, 0, 0, 1]
    for k in r.kinds:
        assert k.bytes == tuple(cache_bytes(k.config, t) for t in tokens), k.kind
    for recurrent in r.kinds[1:3]:
        assert recurrent.kv_per_token == 0 and len(set(recurrent.bytes)) == 1 and recurrent.state > 0


def test_decode_flops_follow_the_per_token_formulas():
    """Each attention layer adds 4 x n_heads x head_dim FLOPs per cached token (q·k and p·v); a Gated DeltaNet
    layer's step is 6 x nv x dk x dv whatever the context (engine/layers/gdn.py), on top of 2 x the weights."""
    r = fixed_state(TINY, (10, 20), dtype="fp32", marks=(10,))
    for k in r.kinds:
        assert k.flops[1] - k.flops[0] == k.attention_layers * 4 * TINY.n_heads * TINY.head_width * 10, k.kind
    for k in (r.kinds[0], r.kinds[1], r.kinds[3]):   # attention and Gated DeltaNet layers only
        gdn_layers = TINY.n_layers - k.attention_layers
        assert k.flops[0] - 2 * matmul_params(k.config) == (
            k.attention_layers * 4 * TINY.n_heads * TINY.head_width * 11 + gdn_layers * 6 * 4 * 6 * 6), k.kind


def test_qwen3_next_at_4k_128k_1m():
    """Issue 23: Qwen3-Next-80B caches 24,576 bytes per token in bf16 (12 attention layers); every layer attention
    would cache 98,304; every layer Gated DeltaNet caches nothing that grows."""
    cfg = PRESETS["qwen3-next-80b-a3b"].config
    r = fixed_state(cfg, (1, 1_048_576))
    attn, gdn, mamba, hybrid = r.kinds
    assert hybrid.config == cfg and hybrid.kind == "hybrid: 12 attention of 48"
    assert (attn.kv_per_token, gdn.kv_per_token, hybrid.kv_per_token) == (98_304, 0, 24_576)
    assert hybrid.at_marks == tuple(24_576 * t + hybrid.state for t in (4_096, 131_072, 1_048_576))
    assert gdn.at_marks == (gdn.state,) * 3 and gdn.state == hybrid.state * 4 // 3   # 48 vs 36 GDN layers
    assert attn.flops_at_marks[2] > hybrid.flops_at_marks[2] > gdn.flops_at_marks[2]
    assert mamba.kv_per_token == 0 and mamba.at_marks == (mamba.state,) * 3
    assert mamba.config.layer_types == ("mamba2",) * 48


def test_layouts_spread_attention_evenly():
    assert attention_positions(48, 12) == set(range(4, 49, 4)) and attention_positions(10, 3) == {3, 6, 10}
    assert with_attention_layers(PRESETS["qwen3-next-80b-a3b"].config, 12) == PRESETS["qwen3-next-80b-a3b"].config
    nemotron = TINY.replace(layer_types=("gdn", "none", "full", "none"), ffn_types=("none", "dense", "none", "dense"))
    assert with_attention_layers(nemotron, 1).layer_types == ("gdn", "none", "full", "none")
    assert with_attention_layers(nemotron, 2).layer_types == ("full", "none", "full", "none")
    with pytest.raises(ValueError, match="attention_layers: 3 is not between 0 and the 2 mixer layers"):
        with_attention_layers(nemotron, 3)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_a_layout_keeps_every_ffn(k):
    """The Trade-offs page's layouts change the mixers only: a Nemotron-H-like model (mixer-only and FFN-only
    layers) keeps its FFN-only layers and its FFN-free mixer layers, so the FFN parameters stay the model's."""
    from engine.budget.params import count_params
    nemotron = TINY.replace(layer_types=("gdn", "none", "full", "none"), ffn_types=("none", "dense", "none", "dense"))
    cfg = with_attention_layers(nemotron, k, "mamba2")
    assert [s.ffn for s in cfg.layer_specs] == ["none", "dense", "none", "dense"]
    assert count_params(cfg).components["ffn"] == count_params(nemotron).components["ffn"]


def test_chart_has_both_panels_with_units():
    r = fixed_state(PRESETS["qwen3-next-80b-a3b"].config, (1, 4_096, 131_072, 1_048_576))
    fig = fixed_state_figure(r)
    names = {t.name for t in fig.data}
    assert {k.kind for k in r.kinds} <= names
    assert fig.layout.xaxis.title.text == "context (tokens, log)"
    assert "bytes per sequence" in fig.layout.yaxis.title.text
    assert "FLOPs per decoded token" in fig.layout.yaxis2.title.text


def test_lecture_section(new_app):
    at = new_app(page=LECTURE, section="state", preset="qwen3-next-80b-a3b")
    at.run(timeout=120)
    assert not at.exception and not at.error
    assert at.header[0].value.endswith("A fixed state instead of a growing cache")
    shown = {m.label: m.value for m in at.metric}
    assert shown["hybrid: 12 attention of 48, at 1M tokens"] == "24.04 GiB"
    assert shown["Mamba-2, every layer, at 1M tokens"] == "49.20 MiB"   # 51,585,024 B, whatever the context
    assert any("Mamba-2" in c.value for c in at.caption)
