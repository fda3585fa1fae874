"""Multi-token prediction (DeepSeek-V3's num_nextn_predict_layers) is counted beside the total, never in it:
the closed form == transformers' own MtpModel (built on the meta device, the shared embedding and head left
out) on tiny configs, and == a few-line formula from the published DeepSeek-V3 config.json (11,610,067,968)."""
import json
from pathlib import Path

import pytest
import torch

from engine.budget.params import count_params
from engine.cli import main
from engine.config import ModelConfig

transformers = pytest.importorskip("transformers", minversion="5.0")
from transformers.modeling_layers import MtpModel  # noqa: E402

from engine.interop import from_hf_config, hf_model_from_config  # noqa: E402

PUBLISHED = json.loads((Path(__file__).parent / "data" / "hf_configs" / "deepseek-v3.json").read_text())
_TINY = dict(vocab_size=97, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
             num_attention_heads=4, kv_lora_rank=12, qk_rope_head_dim=6, qk_nope_head_dim=10, v_head_dim=14,
             n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2, first_k_dense_replace=1)


def _transformers_mtp(config: dict) -> int:
    with torch.device("meta"):
        hf = hf_model_from_config("deepseek_v3", config)
        mtp = MtpModel(hf, hf.config.num_nextn_predict_layers)
    shared = {id(p) for m in (hf.model.embed_tokens, hf.lm_head) for p in m.parameters()}
    return sum(p.numel() for p in mtp.parameters() if id(p) not in shared)


@pytest.mark.parametrize("extra", [dict(q_lora_rank=20, num_nextn_predict_layers=1),
                                   dict(q_lora_rank=None, n_shared_experts=2, num_nextn_predict_layers=2)])
def test_closed_form_equals_transformers_mtp_model(extra):
    config = dict(_TINY, **extra)
    cfg = from_hf_config({"model_type": "deepseek_v3", **config})
    assert cfg.mtp_depth == extra["num_nextn_predict_layers"]
    assert count_params(cfg).mtp == _transformers_mtp(config) > 0


def test_deepseek_v3_module_by_hand(capsys):
    d, H, rq, r, dn, dr, dv, E, f = 7168, 128, 1536, 512, 128, 64, 128, 256, 2048
    attention = d * rq + rq + rq * H * (dn + dr) + d * (r + dr) + r + r * H * (dn + dv) + H * dv * d
    moe_block = attention + E * d + E * 3 * d * f + 3 * d * f + 2 * d   # router, experts, one shared, 2 norms
    module = moe_block + 2 * d * d + 3 * d                              # eh_proj; enorm, hnorm, head norm
    assert module == 11_610_067_968 == count_params(from_hf_config(PUBLISHED)).mtp
    assert main(["params", "--preset", "deepseek-v3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["mtp_params"], out["total_params"]) == (module, 671_026_404_352)   # beside the total, not in it


def test_models_without_mtp_report_zero_and_writers_refuse_it():
    from engine.interop.hf_export import to_hf_config
    from engine.config import ConfigError
    assert count_params(ModelConfig()).mtp == 0
    with pytest.raises(ConfigError) as e:
        to_hf_config(ModelConfig(mtp_depth=1), "gpt2")
    assert any(p.startswith("mtp_depth") for p in e.value.problems)
