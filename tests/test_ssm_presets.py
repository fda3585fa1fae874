"""State-space hybrid presets: totals and active counts against transformers' meta-device build of each config.json
in tests/data/hf_configs (sources in SOURCES.md), every published figure re-derived by hand from those files,
`import-hf` on them, Jamba's KV cache at 256K tokens against Llama-2-7B's and Mixtral's, and Nemotron-H-8B's state
under each engine's convention."""
import shutil
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers", minversion="5.0")

from engine.budget.memory import kv_cache_bytes, kv_cache_layers, state_bytes  # noqa: E402
from engine.budget.params import count_params  # noqa: E402
from engine.cli import main  # noqa: E402
from engine.config import ModelConfig  # noqa: E402
from engine.interop.hf_config import import_hf_config  # noqa: E402
from engine.limits import json_loads  # noqa: E402
from engine.plan.quant import kv_quant_bytes  # noqa: E402
from engine.presets import PRESETS  # noqa: E402
from engine.validation import ConfigError  # noqa: E402
from tests.hf_checks import hf_active, hf_meta  # noqa: E402

transformers.logging.set_verbosity_error()
DATA = Path(__file__).parent / "data" / "hf_configs"
GiB = 2**30
# preset -> (config.json, total, active)
HYBRID = {"jamba-v0.1": ("jamba-v0.1.json", 51_570_323_328, 12_110_311_296),
          "nemotron-h-8b": ("nemotron-h-8b.json", 8_100_852_736, 8_100_852_736),
          "nemotron-3-nano-30b-a3b": ("nemotron-3-nano-30b-a3b.json", 31_577_937_344, 3_580_073_408)}


def _load(file: str) -> dict:
    return json_loads((DATA / file).read_text(), file)


@pytest.mark.parametrize("name", HYBRID)
def test_total_and_active_equal_transformers(name):
    file, total, active = HYBRID[name]
    hf = hf_meta(_load(file))
    assert sum(p.numel() for p in hf.parameters()) == total == PRESETS[name].reference_params
    assert hf_active(hf) == active
    count = count_params(PRESETS[name].config)
    assert (count.total, count.active) == (total, active)


@pytest.mark.parametrize("name", HYBRID)
def test_import_hf_on_the_published_config_is_the_preset(name, tmp_path, capsys):
    file, total, active = HYBRID[name]
    shutil.copy(DATA / file, tmp_path / "config.json")
    assert main(["import-hf", str(tmp_path)]) == 0
    cfg = ModelConfig.from_yaml(capsys.readouterr().out)
    assert (count_params(cfg).total, count_params(cfg).active) == (total, active)
    assert cfg.replace(name=name) == PRESETS[name].config


def test_nemotron_h_8b_remote_code_keys_are_checked_not_read():
    """The 8B file is written for NVIDIA's remote code: attention_head_dim and rms_norm_eps, which transformers'
    Nemotron-H never reads (it builds head_dim 128 and reads layer_norm_epsilon): the importer checks the first
    against what transformers builds and lists the second as ignored."""
    d = _load("nemotron-h-8b.json")
    cfg, ignored = import_hf_config(d)
    assert cfg.head_dim is None and cfg.d_model // cfg.n_heads == d["attention_head_dim"] == 128
    assert cfg.norm_eps == d["layer_norm_epsilon"] and any(k.startswith("rms_norm_eps") for k in ignored)
    with pytest.raises(ConfigError, match="attention_head_dim: 64 is not expressible"):
        import_hf_config(dict(d, attention_head_dim=64))


def _attention(d: int, heads: int, kv: int, hd: int) -> int:
    return 2 * d * heads * hd + 2 * d * kv * hd


def _mamba2(d: int, H: int, P: int, G: int, N: int, K: int) -> int:
    """in_proj (z, x, B, C, dt), depthwise conv with bias over x|B|C, dt_bias + A_log + D, gated-norm gain, out."""
    d_in, conv = H * P, H * P + 2 * G * N
    return d * (2 * d_in + 2 * G * N + H) + conv * (K + 1) + 3 * H + d_in + d_in * d


def test_jamba_by_hand():
    """Jamba paper (arXiv 2403.19887): 52B total, 12B active. d 4096, V 65536 untied; Mamba-1 (inner 8192, state
    16, dt rank 256, conv 4 with bias, dt/B/C RMSNorms) but layers 4, 12, 20, 28 (GQA 32/8); 16 SwiGLU experts
    of 14336 top-2 on odd layers, a dense SwiGLU on even ones; two norms a layer."""
    d, inner, N, R = 4096, 8192, 16, 256
    mamba = d * 2 * inner + inner * 4 + inner + inner * (R + 2 * N) + R * inner + inner + inner * N + inner \
        + inner * d + R + 2 * N
    swiglu, router = 3 * d * 14336, 16 * d
    fixed = 4 * _attention(d, 32, 8, 128) + 28 * mamba + 16 * swiglu + 16 * router + 32 * 2 * d + d \
        + 2 * 65536 * d
    assert fixed + 16 * 16 * swiglu == 51_570_323_328
    assert fixed + 16 * 2 * swiglu == 12_110_311_296
    assert round(51_570_323_328 / 1e9) == 52 and round(12_110_311_296 / 1e9) == 12


def test_nemotron_h_8b_by_hand():
    """Nemotron-H paper (arXiv 2504.03624) 8B: 24 Mamba-2 (128 heads of 64, 8 groups, state 128), 4 attention
    (32/8 heads of 128), 24 squared-ReLU MLPs of 21504; one norm a layer; V 131072 untied."""
    d = 4096
    total = 24 * _mamba2(d, 128, 64, 8, 128, 4) + 4 * _attention(d, 32, 8, 128) + 24 * 2 * d * 21504 \
        + 52 * d + d + 2 * 131072 * d
    assert total == 8_100_852_736 and round(total / 1e9) == 8


def test_nemotron_3_nano_by_hand():
    """NVIDIA-Nemotron-3-Nano-30B-A3B, as NVIDIA's Jetson AI Lab card describes it: "30B total / 3.5B active",
    23 Mamba-2 (64 heads of 64, 8 groups), 6 attention (32/2 of 128), 23 MoE layers of 128 squared-ReLU experts
    (1856) top-6 with a sigmoid router, plus one shared expert (3712). The router's selection bias
    (e_score_correction_bias) is a buffer in transformers, not a parameter: it is not counted."""
    d = 2688
    expert, moe_fixed = 2 * d * 1856, 128 * d + 2 * d * 3712
    fixed = 23 * _mamba2(d, 64, 64, 8, 128, 4) + 6 * _attention(d, 32, 2, 128) + 23 * moe_fixed + 52 * d + d \
        + 2 * 131072 * d
    assert fixed + 23 * 128 * expert == 31_577_937_344
    assert fixed + 23 * 6 * expert == 3_580_073_408
    assert 30e9 < 31_577_937_344 < 32e9 and int(3_580_073_408 / 1e8) == 35


def test_jamba_kv_cache_at_256k_against_llama_2_7b_and_mixtral():
    """Jamba paper, Table 1 (256K tokens, 16-bit): KV cache Llama-2 7B 128GB, Mixtral 32GB, Jamba 4GB. Jamba
    keeps K and V on 4 of its 32 layers with 8 KV heads: 4 * 2 * 8 * 128 * 2 B a token."""
    tokens = 262_144
    jamba = kv_cache_bytes(PRESETS["jamba-v0.1"].config, 1, tokens, "bf16")
    assert jamba == 4 * 2 * 8 * 128 * 2 * tokens == 4 * GiB
    assert kv_cache_bytes(PRESETS["llama-2-7b"].config, 1, tokens, "bf16") == 128 * GiB == 32 * jamba
    assert kv_cache_bytes(PRESETS["mixtral-8x7b"].config, 1, tokens, "bf16") == 32 * GiB


def test_nemotron_h_8b_state_under_each_convention():
    """Per sequence, 24 Mamba-2 layers: a conv window over x|B|C (8192 + 2 * 8 * 128 = 10240 channels) and a
    128 x 64 x 128 recurrent state. transformers keeps K = 4 positions in the model dtype and the state in fp32;
    vLLM K - 1 in the model dtype and the state in mamba_ssm_cache_dtype (fp32 here); llama.cpp K - 1, all fp32.
    Attention adds 4 * 2 * 8 * 128 * 2 = 16,384 bytes of KV a token in bf16."""
    cfg = PRESETS["nemotron-h-8b"].config
    conv, state = 10240, 128 * 64 * 128 * 4
    assert state_bytes(cfg, 1, "bf16", "transformers") == {"conv": 24 * 4 * conv * 2, "recurrent": 24 * state}
    assert state_bytes(cfg, 1, "bf16", "vllm") == {"conv": 24 * 3 * conv * 2, "recurrent": 24 * state}
    assert state_bytes(cfg, 1, "bf16", "llama.cpp") == {"conv": 24 * 3 * conv * 4, "recurrent": 24 * state}
    assert kv_cache_bytes(cfg, 1, 1, "bf16") == 16_384


def test_nemotron_h_8b_caches_keys_only_on_its_attention_layers():
    """kv_cache_layers (every KV figure's one path: bytes, the planner, serving) asks each layer's mixers: only
    the 4 '*' layers of the pattern hold keys and values; fp8 storage adds one K and one V fp32 scale on those."""
    pattern, tokens = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", 1000
    layers = kv_cache_layers(PRESETS["nemotron-h-8b"].config, 1, tokens)
    assert [i for i, (values, _) in enumerate(layers) if values] == [i for i, c in enumerate(pattern) if c == "*"]
    assert {values for values, _ in layers} == {0, 2 * 8 * 128 * tokens}
    assert kv_quant_bytes(layers, "fp8", "bf16") == 4 * (2 * 8 * 128 * tokens + 2 * 4)
