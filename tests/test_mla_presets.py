"""DeepSeek-V3: the preset and the published config.json against transformers' meta-device count (total and
active), `params --json`, and `memory --json` reporting the latent KV cache (70,272 B/token in bf16) with the
expanded cache in its own key."""
import json
from pathlib import Path

import pytest

from engine.budget.memory import memory_budget
from engine.budget.params import count_params
from engine.cli import main
from engine.config import ConfigError
from engine.presets import PRESETS

transformers = pytest.importorskip("transformers", minversion="5.0")
from engine.interop import from_hf_config  # noqa: E402
from tests.helpers import hf_active as _hf_active  # noqa: E402
from tests.helpers import hf_meta as _hf_meta  # noqa: E402

PUBLISHED = json.loads((Path(__file__).parent / "data" / "hf_configs" / "deepseek-v3.json").read_text())
TOTAL, ACTIVE = 671_026_404_352, 37_552_282_624


def _without_rope_scaling() -> dict:
    return {k: v for k, v in PUBLISHED.items() if k != "rope_scaling"}


def test_published_config_counts_equal_transformers_and_preset():
    hf = _hf_meta(_without_rope_scaling())   # YaRN changes no parameter; transformers' count is the same
    assert sum(p.numel() for p in hf.parameters()) == TOTAL == PRESETS["deepseek-v3"].reference_params
    assert _hf_active(hf) == ACTIVE
    for cfg in (PRESETS["deepseek-v3"].config, from_hf_config(_without_rope_scaling())):
        count = count_params(cfg)
        assert (count.total, count.active) == (TOTAL, ACTIVE)


def test_import_names_the_unmodelled_yarn_scaling():
    with pytest.raises(ConfigError) as e:
        from_hf_config(PUBLISHED)
    assert "rope_scaling" in str(e.value)


def test_params_json(capsys):
    assert main(["params", "--preset", "deepseek-v3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["total"], out["active"]) == (TOTAL, ACTIVE)


def test_memory_json_reports_latent_and_expanded_cache(capsys):
    assert main(["memory", "--preset", "deepseek-v3", "--batch", "1", "--seq", "65536", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_cache_bytes"] == (512 + 64) * 61 * 2 * 65536 == 70_272 * 65536
    assert out["kv_cache_expanded_bytes"] == 61 * 128 * (192 + 128) * 2 * 65536
    assert "kv_lora_rank=512" in out["formulas"]["kv_cache_bytes"]


def test_dense_models_have_no_expanded_key():
    assert memory_budget(PRESETS["gpt2"].config, 1, 1024).kv_cache_expanded_bytes is None
