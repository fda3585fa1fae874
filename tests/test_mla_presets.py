"""DeepSeek-V3 and DeepSeek-V2-Lite: the presets and the published config.json files against transformers'
meta-device count (total and active), `import-hf` on the published files (YaRN with DeepSeek's softmax
correction now imports), `params --json`, and `memory --json` reporting the latent KV cache (70,272 B/token in
bf16) with the expanded cache in its own key."""
import json
from pathlib import Path

import pytest

from engine.budget.memory import memory_budget
from engine.budget.params import count_params
from engine.cli import main
from engine.config import ModelConfig
from engine.presets import PRESETS

transformers = pytest.importorskip("transformers", minversion="5.0")
from engine.interop import from_hf_config  # noqa: E402
from tests.hf_checks import hf_active as _hf_active  # noqa: E402
from tests.hf_checks import hf_meta as _hf_meta  # noqa: E402

DATA = Path(__file__).parent / "data" / "hf_configs"
PUBLISHED = json.loads((DATA / "deepseek-v3.json").read_text())
TOTAL, ACTIVE = 671_026_404_352, 37_552_282_624
# preset -> (published config.json, total, active)
MODELS = {"deepseek-v3": ("deepseek-v3.json", TOTAL, ACTIVE),
          "deepseek-v2-lite": ("deepseek-v2-lite.json", 15_706_484_224, 2_661_150_208)}


@pytest.mark.parametrize("preset", MODELS)
def test_published_config_counts_equal_transformers_and_preset(preset):
    name, total, active = MODELS[preset]
    published = json.loads((DATA / name).read_text())
    hf = _hf_meta(published)
    assert sum(p.numel() for p in hf.parameters()) == total == PRESETS[preset].reference_params
    assert _hf_active(hf) == active
    imported = from_hf_config(published)
    assert PRESETS[preset].config == imported.replace(name=preset)   # the preset is the published config
    count = count_params(imported)
    assert (count.total, count.active) == (total, active)


@pytest.mark.parametrize("preset", MODELS)
def test_import_hf_cli_on_the_published_config_gives_transformers_counts(preset, tmp_path, capsys):
    name, total, active = MODELS[preset]
    (tmp_path / "config.json").write_text((DATA / name).read_text())
    assert main(["import-hf", str(tmp_path)]) == 0
    cfg = ModelConfig.from_yaml(capsys.readouterr().out)
    count = count_params(cfg)
    assert (count.total, count.active) == (total, active)
    assert (cfg.rope_scaling, cfg.rope_factor, cfg.rope_mscale_all_dim) == (
        "yarn", 40.0, {"deepseek-v3": 1.0, "deepseek-v2-lite": 0.707}[preset])


@pytest.mark.parametrize("preset", MODELS)
def test_params_json(preset, capsys):
    assert main(["params", "--preset", preset, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["total_params"], out["active_params"]) == MODELS[preset][1:]


def test_memory_json_reports_latent_and_expanded_cache(capsys):
    assert main(["memory", "--preset", "deepseek-v3", "--batch", "1", "--seq", "65536", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_cache_bytes"] == (512 + 64) * 61 * 2 * 65536 == 70_272 * 65536
    assert out["kv_cache_expanded_bytes"] == 61 * 128 * (192 + 128) * 2 * 65536
    assert "kv_lora_rank=512" in out["formulas"]["kv_cache_bytes"]


def test_dense_models_have_no_expanded_key():
    assert memory_budget(PRESETS["gpt2"].config, 1, 1024).kv_cache_expanded_bytes is None
