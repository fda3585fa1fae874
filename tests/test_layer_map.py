"""engine/layers/layer_map.py: every layer's mixer and FFN kind, held against the published configs' own rules."""
import json
from pathlib import Path

from engine.layers.layer_map import index_ranges, layer_map
from engine.presets import PRESETS
from tests.hybrid_cases import hybrid_configs

HF = Path(__file__).parent / "data" / "hf_configs"


def test_index_ranges():
    assert index_ranges([1, 2, 3, 5, 7, 8]) == "1–3, 5, 7–8"
    assert index_ranges([4]) == "4"
    assert index_ranges([]) == ""


def test_qwen3_next_follows_full_attention_interval():
    """Qwen3-Next's config.json: full_attention_interval 4 (transformers' Qwen3NextConfig: layer i is full attention
    when (i + 1) % interval == 0), MoE in every layer (decoder_sparse_step 1, mlp_only_layers [])."""
    hf = json.loads((HF / "qwen3-next-80b-a3b.json").read_text())
    every, n = hf["full_attention_interval"], hf["num_hidden_layers"]
    m = layer_map(PRESETS["qwen3-next-80b-a3b"].config)
    rows = {r.key: r.layers for r in m.mixers}
    assert rows == {"gdn": tuple(i for i in range(1, n + 1) if i % every),
                    "full": tuple(range(every, n + 1, every))}
    assert [r.label for r in m.mixers] == ["Gated DeltaNet", "softmax attention (full)"]
    assert [(r.key, r.layers) for r in m.ffns] == [("moe", tuple(range(1, n + 1)))]
    assert m.mixers[1].ranges == ", ".join(str(i) for i in range(4, 49, 4))
    assert m.cells[3].label == "softmax attention + MoE" and m.kinds == 2


def test_dense_first_layers_and_windows():
    """DeepSeek-V3: first_k_dense_replace 3 (layers 1-3 dense); Gemma-2: global_every 2 (layers 2, 4, ... full)."""
    m = layer_map(PRESETS["deepseek-v3"].config)
    assert [(r.key, r.ranges) for r in m.ffns] == [("dense", "1–3"), ("moe", "4–61")]
    assert m.mixers[0].label == "softmax attention (full, MLA)"
    g = layer_map(PRESETS["gemma-2-2b"].config)
    rows = {r.key: r.layers for r in g.mixers}
    assert rows["full"] == tuple(range(2, 27, 2)) and rows["sliding"] == tuple(range(1, 27, 2))
    assert "sliding 4,096" in g.mixers[0].label


def test_one_kind_everywhere():
    m = layer_map(PRESETS["gpt2"].config)
    assert m.kinds == 1 and [(r.key, r.ranges) for r in m.mixers] == [("full", "1–12")]
    assert [r.label for r in m.ffns] == ["dense FFN"]


def test_every_mixture_cell_is_its_layer_spec():
    """Each cell is the layer_types / ffn_types entry written in the config (a word per layer, as typed)."""
    for name, cfg in hybrid_configs().items():
        m = layer_map(cfg)
        assert [c.mixer for c in m.cells] == list(cfg.layer_types), name
        want_ffn = list(cfg.ffn_types) if cfg.ffn_types else ["moe" if m else "dense" for m in cfg.moe_layers]
        assert [c.ffn for c in m.cells] == want_ffn, name
        assert sorted(i for r in m.mixers for i in r.layers) == list(range(1, cfg.n_layers + 1))
    labels = {r.key: r.label for r in layer_map(hybrid_configs()["attention beside gdn (falcon-h1)"]).mixers}
    assert labels == {"full+gdn": "softmax attention (full) beside Gated DeltaNet"}


def test_chunked_attention_is_its_own_kind():
    """Llama 4 Scout: chunked local attention (attention_chunk_size 8,192) with every fourth layer full (NoPE)."""
    m = layer_map(PRESETS["llama-4-scout-17b-16e"].config)
    rows = {r.key: r for r in m.mixers}
    assert rows["full"].layers == tuple(range(4, 49, 4)) and len(rows["chunked"].layers) == 36
    assert rows["chunked"].label == "softmax attention (chunks of 8,192)"


def test_jamba_periods_and_offsets():
    """Jamba v0.1's config.json: attention where i % attn_layer_period == attn_layer_offset (0-based), experts where
    i % expert_layer_period == expert_layer_offset; Mamba-1 elsewhere (transformers' JambaConfig)."""
    hf = json.loads((HF / "jamba-v0.1.json").read_text())
    n = hf["num_hidden_layers"]
    m = layer_map(PRESETS["jamba-v0.1"].config)
    rows = {r.key: r.layers for r in m.mixers}
    attention = tuple(i + 1 for i in range(n) if i % hf["attn_layer_period"] == hf["attn_layer_offset"])
    assert rows == {"full": attention, "mamba1": tuple(i for i in range(1, n + 1) if i not in attention)}
    assert {r.key: r.layers for r in m.ffns}["moe"] == tuple(
        i + 1 for i in range(n) if i % hf["expert_layer_period"] == hf["expert_layer_offset"])
    assert [r.label for r in m.mixers] == ["Mamba-1", "softmax attention (full)"]
