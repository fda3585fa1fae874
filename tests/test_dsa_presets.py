"""DeepSeek-V3.2, GLM-5 and Kimi K2: each preset equals the import of its published config.json (tests/data/
hf_configs, SOURCES.md), whose parameter count (total and active) equals transformers' meta-device build of that
file; `import-hf` prints the same; `memory --json` reports the indexer's key cache as its own part. Kimi K2's file
says model_type kimi_k2, which transformers 5.24 builds only through Kimi-K2.5's text config (as deepseek_v3):
its count is DeepseekV3's of the same file."""
import json
from pathlib import Path

import pytest

from engine.budget.params import count_params
from engine.cli import main
from engine.config import ModelConfig
from engine.layers.indexer import indexer_params
from engine.presets import PRESETS

transformers = pytest.importorskip("transformers", minversion="5.0")
from engine.interop.hf_config import import_hf_config  # noqa: E402
from tests.hf_checks import hf_active, hf_meta  # noqa: E402

DATA = Path(__file__).parent / "data" / "hf_configs"
# preset -> (published config.json, transformers' total, active, the multi-token-prediction modules counted apart)
MODELS = {"deepseek-v3.2": ("deepseek-v3.2.json", 671_877_929_216, 38_403_807_488, 11_624_027_392),
          "glm-5": ("glm-5.json", 743_911_199_232, 41_784_709_632, 9_952_920_320),
          "kimi-k2": ("kimi-k2.json", 1_026_408_209_408, 32_861_477_888, 0)}


def _published(preset: str) -> dict:
    return json.loads((DATA / MODELS[preset][0]).read_text())


@pytest.mark.parametrize("preset", MODELS)
def test_published_config_counts_equal_transformers_and_preset(preset):
    _, total, active, mtp = MODELS[preset]
    published = _published(preset)
    as_built = dict(published, model_type="deepseek_v3") if published["model_type"] == "kimi_k2" else published
    hf = hf_meta(as_built)
    assert sum(p.numel() for p in hf.parameters()) == total == PRESETS[preset].reference_params
    assert hf_active(hf) == active
    imported, ignored = import_hf_config(published)
    assert PRESETS[preset].config == imported.replace(name=preset)   # the preset is the published config
    count = count_params(imported)
    assert (count.total, count.active, count.mtp) == (total, active, mtp)
    if preset == "kimi-k2":
        assert any(line.startswith("model_type: kimi_k2 is DeepSeek-V3") for line in ignored)


def test_the_indexers_are_what_transformers_builds():
    """Per layer, transformers' indexer module holds exactly indexer_params (every one of the 61 / 78 layers)."""
    for preset, layers in (("deepseek-v3.2", 61), ("glm-5", 78)):
        hf = hf_meta(_published(preset))
        sizes = {sum(p.numel() for p in layer.self_attn.indexer.parameters()) for layer in hf.model.layers}
        cfg = PRESETS[preset].config
        assert sizes == {indexer_params(cfg)} and count_params(cfg).components["indexer"] == layers * sizes.pop()
    assert indexer_params(PRESETS["deepseek-v3.2"].config) == 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64


@pytest.mark.parametrize("preset", MODELS)
def test_import_hf_cli_on_the_published_config_gives_transformers_counts(preset, tmp_path, capsys):
    (tmp_path / "config.json").write_text((DATA / MODELS[preset][0]).read_text())
    assert main(["import-hf", str(tmp_path)]) == 0
    cfg = ModelConfig.from_yaml(capsys.readouterr().out)
    count = count_params(cfg)
    assert (count.total, count.active) == MODELS[preset][1:3]


def test_memory_json_reports_the_indexer_key_cache_as_its_own_part(capsys):
    assert main(["memory", "--preset", "deepseek-v3.2", "--batch", "1", "--seq", "65536", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_cache_index_bytes"] == 61 * 132 * 65536
    assert out["kv_cache_bytes"] == (70_272 + 61 * 132) * 65536
    assert "FP8" in out["formulas"]["kv_cache_bytes"]


def test_sparse_flops_stop_growing_with_context_but_the_indexer_does(capsys):
    """Past index_topk MLA's cost per new token is flat; the indexer still scores every earlier key."""
    assert main(["flops", "--preset", "deepseek-v3.2", "--batch", "1", "--seq", "8192", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["indexer_flops"] > 0 and out["backward_flops"] == 2 * (out["matmul_flops"] + out["attention_flops"])


def test_kimi_k2_reads_as_the_deepseek_v3_it_is():
    """The same dict as deepseek_v3 gives the same model; the text config a Kimi-K2.5 wrapper carries is one too."""
    published = _published("kimi-k2")
    as_v3 = import_hf_config(dict(published, model_type="deepseek_v3"))[0]
    assert import_hf_config(published)[0] == as_v3.replace(name="kimi_k2")
    text = {k: v for k, v in published.items() if k not in ("auto_map", "architectures")}
    assert count_params(import_hf_config(text)[0]).total == MODELS["kimi-k2"][1]


def test_import_hf_check_builds_kimi_k2_as_deepseek_v3(tmp_path, capsys):
    """--check on a shrunk kimi_k2 config.json: transformers builds it as deepseek_v3, the logits agree."""
    small = dict(_published("kimi-k2"), hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=12, q_lora_rank=20,
                 qk_rope_head_dim=6, qk_nope_head_dim=10, v_head_dim=8, n_routed_experts=8, vocab_size=97,
                 max_position_embeddings=64, bos_token_id=None, eos_token_id=None)
    small["rope_scaling"] = dict(small["rope_scaling"], original_max_position_embeddings=16)
    (tmp_path / "config.json").write_text(json.dumps(small))
    assert main(["import-hf", str(tmp_path), "--check", "--tokens", "24"]) == 0
    assert "check:" in capsys.readouterr().out
