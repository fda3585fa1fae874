"""DeepSeek-V3's multi-token-prediction module (model.layers.61 of deepseek-ai/DeepSeek-V3's
model.safetensors.index.json) as `plan --quant checkpoint` counts it: one more decoder block of the last layer's
shapes (fp8 blocks with their scales, as the checkpoint ships that layer) plus the module's own tensors, all bf16
in the release: enorm, hnorm and shared_head.norm [7168], eh_proj [7168, 14336], embed_tokens and
shared_head.head [129280, 7168]."""
from __future__ import annotations

import math

from engine.checkpoint import shipped_bytes
from engine.plan.quant import checkpoint_bytes
from engine.plan.tensors import param_tensors
from engine.presets import get_preset

MTP_OWN = {"enorm.weight": (7168,), "hnorm.weight": (7168,), "shared_head.norm.weight": (7168,),
           "eh_proj.weight": (7168, 14336), "embed_tokens.weight": (129280, 7168),
           "shared_head.head.weight": (129280, 7168)}


def test_deepseek_v3s_mtp_module_is_a_last_layer_block_and_its_own_bf16_tensors() -> None:
    cfg = get_preset("deepseek-v3").config
    assert (cfg.mtp_depth, cfg.d_model, cfg.vocab_size, cfg.n_layers) == (1, 7168, 129280, 61)
    last = sum(shipped_bytes(cfg, t.role, t.name, t.shape)[0] for t in param_tensors(cfg) if t.layer == 60)
    own = sum(2 * math.prod(s) for s in MTP_OWN.values())
    assert checkpoint_bytes(cfg)[1] == last + own


def test_no_mtp_module_adds_nothing() -> None:
    cfg = get_preset("deepseek-v3").config.replace(mtp_depth=None)
    assert checkpoint_bytes(cfg)[1] == 0
