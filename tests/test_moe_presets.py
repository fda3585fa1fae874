"""MoE presets: total and active counts against transformers' meta-device build of each published config.json,
`import-hf` on those files, and `params --json` (active beside total; equal for dense models)."""
import json
import shutil
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.params import count_params  # noqa: E402
from engine.cli import main  # noqa: E402
from engine.config import ModelConfig  # noqa: E402
from engine.presets import PRESETS  # noqa: E402
from tests.hf_checks import hf_active as _hf_active  # noqa: E402
from tests.hf_checks import hf_meta as _hf_meta  # noqa: E402

transformers.logging.set_verbosity_error()
DATA = Path(__file__).parent / "data" / "hf_configs"
# preset -> (published config.json, total, active) as the issue states them
MOE = {"mixtral-8x7b": ("mixtral-8x7b.json", 46_702_792_704, 12_879_925_248),
       "qwen3-30b-a3b": ("qwen3-30b-a3b.json", 30_532_122_624, 3_353_032_704),
       "olmoe-1b-7b": ("olmoe-1b-7b.json", 6_919_161_856, 1_282_017_280),
       "qwen1.5-moe-a2.7b": ("qwen1.5-moe-a2.7b.json", 14_315_784_192, 2_689_173_504),
       "gpt-oss-20b": ("gpt-oss-20b.json", 20_914_757_184, 4_187_440_704)}


@pytest.mark.parametrize("name", MOE)
def test_total_and_active_equal_transformers(name):
    file, total, active = MOE[name]
    hf = _hf_meta(json.loads((DATA / file).read_text()))
    assert sum(p.numel() for p in hf.parameters()) == total == PRESETS[name].reference_params
    assert _hf_active(hf) == active
    count = count_params(PRESETS[name].config)
    assert (count.total, count.active) == (total, active)


def test_mixtral_by_hand():
    """d 4096, 32 layers, GQA 32/8 of 128, 8 SwiGLU experts of 14336, V 32000 untied."""
    attn = 2 * 4096 * 4096 + 2 * 4096 * 1024
    expert = 3 * 4096 * 14336
    layer_fixed = attn + 2 * 4096 + 8 * 4096           # attention, two RMSNorm gains, router
    emb = 2 * 32000 * 4096 + 4096                       # embedding, head, final norm
    assert 32 * (layer_fixed + 8 * expert) + emb == 46_702_792_704
    assert 32 * (layer_fixed + 2 * expert) + emb == 12_879_925_248


@pytest.mark.parametrize("name", MOE)
def test_import_hf_on_the_published_config(name, tmp_path, capsys):
    file, total, active = MOE[name]
    shutil.copy(DATA / file, tmp_path / "config.json")
    assert main(["import-hf", str(tmp_path)]) == 0
    cfg = ModelConfig.from_yaml(capsys.readouterr().out)
    count = count_params(cfg)
    assert (count.total, count.active) == (total, active)
    assert cfg.replace(name=name) == PRESETS[name].config


@pytest.mark.parametrize("name", [*MOE, "llama-3-8b"])
def test_params_json_prints_active(name, capsys):
    assert main(["params", "--preset", name, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    if name in MOE:
        assert (out["total_params"], out["active_params"]) == MOE[name][1:]
        assert out["total_params"] - out["non_embedding_params"] == \
            out["active_params"] - out["active_non_embedding_params"]
        assert out["components"]["routed_experts"] > 0 and out["components"]["router"] > 0
    else:
        assert out["active_params"] == out["total_params"] == 8_030_261_248
        assert out["active_non_embedding_params"] == out["non_embedding_params"]
