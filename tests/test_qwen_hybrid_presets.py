"""The Qwen3-Next and Qwen3.5 presets: total and active counts against transformers' meta-device build of each
published config.json (tests/data/hf_configs, SOURCES.md), the presets equal to importing those files, and the
acceptance commands: `params --preset qwen3-next-80b-a3b --json` and `memory ... --seq 262144 --json`."""
import json
from pathlib import Path

import pytest

from engine.budget.memory import kv_cache_bytes, state_bytes
from engine.budget.params import count_params
from engine.cli import main
from engine.interop.hf_config import import_hf_config
from engine.presets import PRESETS
from tests.hf_checks import hf_active, hf_meta

DATA = Path(__file__).parent / "data" / "hf_configs"
# preset -> (file, total, active) re-derived from the published config.json with transformers 5.24
HYBRID = {"qwen3-next-80b-a3b": ("qwen3-next-80b-a3b.json", 79_674_391_296, 3_874_929_408),
          "qwen3.5-9b": ("qwen3.5-9b.json", 8_953_803_264, 8_953_803_264),
          "qwen3.5-35b-a3b": ("qwen3.5-35b-a3b.json", 34_660_610_688, 3_454_988_928)}


def _text_config(d: dict) -> dict:
    """The config transformers' text-only causal LM is built from (the multimodal files' text_config)."""
    if "text_config" not in d:
        return d
    family = {"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}[d["model_type"]]
    return {**d["text_config"], "model_type": family}


@pytest.mark.parametrize("name", HYBRID)
def test_total_and_active_equal_transformers(name):
    pytest.importorskip("transformers", minversion="5.0")
    file, total, active = HYBRID[name]
    hf = hf_meta(_text_config(json.loads((DATA / file).read_text())))
    assert sum(p.numel() for p in hf.parameters()) == total == PRESETS[name].reference_params
    assert (hf_active(hf) if total != active else total) == active   # a dense model has no top-k to read
    count = count_params(PRESETS[name].config)
    assert (count.total, count.active) == (total, active)


@pytest.mark.parametrize("name", HYBRID)
def test_presets_are_the_published_configs(name):
    imported, _ = import_hf_config(json.loads((DATA / HYBRID[name][0]).read_text()))
    preset = PRESETS[name].config
    # the Qwen3.5-9B copy omits max_position_embeddings: the preset takes the model card's 262,144
    assert imported.replace(name=name, context_length=preset.context_length) == preset


def test_qwen3_next_by_hand():
    """d 2048, 48 layers (36 Gated DeltaNet, 12 gated attention), 512 experts of 512 (top 10) + 1 shared, V 151936."""
    d, V = 2048, 151936
    gdn = d * (2 * 16 * 128 + 2 * 32 * 128 + 2 * 32) + (2 * 16 * 128 + 32 * 128) * 4 + 2 * 32 + 128 + 32 * 128 * d
    attn = d * 16 * 256 * 2 + 2 * d * 2 * 256 + 16 * 256 * d + 2 * 256      # q and its gate, k, v, o, QK-norm
    moe = d * 512 + 512 * 3 * d * 512 + 3 * d * 512 + d                      # router, experts, shared + its gate
    total = 36 * gdn + 12 * attn + 48 * (moe + 2 * d) + 2 * V * d + d
    assert total == 79_674_391_296
    assert total - 48 * (512 - 10) * 3 * d * 512 == 3_874_929_408


def test_params_cli_prints_the_issue_figures(capsys):
    assert main(["params", "--preset", "qwen3-next-80b-a3b", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["total_params"], data["active_params"]) == (79_674_391_296, 3_874_929_408)


def test_memory_cli_reports_kv_from_the_attention_layers_and_the_state_under_each_convention(capsys):
    cfg = PRESETS["qwen3-next-80b-a3b"].config
    assert main(["memory", "--preset", "qwen3-next-80b-a3b", "--seq", "262144", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # 12 attention layers x 2 (K, V) x 2 KV heads x 256 x 2 bytes = 24,576 bytes per token; 48 layers would be 4x
    assert data["kv_cache_bytes"] == 262144 * 24_576 == kv_cache_bytes(cfg, 1, 262144)
    assert kv_cache_bytes(cfg.replace(layer_types=None), 1, 262144) == 4 * data["kv_cache_bytes"]
    conv_channels, state = 2 * 16 * 128 + 32 * 128, 32 * 128 * 128      # per Gated DeltaNet layer
    expect = {"transformers": (4 * conv_channels * 2, state * 4), "vllm": (3 * conv_channels * 2, state * 2),
              "llama.cpp": (3 * conv_channels * 4, state * 4)}
    for name, (conv, recurrent) in expect.items():
        got = data["states"][name]
        assert (got["conv"], got["recurrent"]) == (36 * conv, 36 * recurrent), name
        assert got["total"] == got["conv"] + got["recurrent"] and got["source"]
        assert state_bytes(cfg, 1, "bf16", name) == {"conv": got["conv"], "recurrent": got["recurrent"]}
    assert data["state_bytes"] == data["states"]["vllm"]["total"]
