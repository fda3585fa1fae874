"""Every parameter of every preset's model carries the role its module declares (engine/plan/tensors.py), none
by a fallback, and the roles group the parameters exactly as count_params' components do; a plain quantization
scheme prices a hybrid's mixer matrices quantized (they were once read as norms and kept in bf16)."""
from __future__ import annotations

import math

import pytest
import torch

from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.model import DecoderLM
from engine.plan.quant import weight_storage
from engine.plan.tensors import KINDS, declared_roles, param_tensors
from engine.presets import PRESETS
from tests.hybrid_cases import HYBRID_BASE, HYBRIDS

CONFIGS = {**{n: p.config for n, p in PRESETS.items()},
           **{f"hybrid {n}": ModelConfig(**{**HYBRID_BASE, **f}) for n, f in HYBRIDS.items()}}

# count_params' components (summed when a tuple) and the roles holding the same parameters
COMMON = {("token_embedding",): ("embedding",), ("positions",): ("positions",), ("output_head",): ("head",),
          ("router",): ("router",), ("attention_sinks",): ("sinks",), ("attention_gate",): ("g", "g_bias"),
          ("indexer",): ("index_q", "index_k", "index_k_norm", "index_weights"),
          ("routed_experts",): tuple(f"expert_{p}{b}" for p in ("gate", "up", "down") for b in ("", "_bias"))}
_SSM_IN_OUT = {("ssm_in",): ("ssm_in", "ssm_in_bias"), ("ssm_conv",): ("conv", "conv_bias"),
               ("ssm_norm",): ("ssm_norm",), ("ssm_out",): ("ssm_out", "ssm_out_bias")}
MIXERS = {
    "gdn": {("gdn_in_proj",): ("ssm_in", "ssm_z", "ssm_beta", "ssm_alpha"), ("gdn_conv",): ("conv",),
            ("gdn_gates",): ("ssm_dt_bias", "ssm_a", "ssm_norm"), ("gdn_out_proj",): ("ssm_out",)},
    "kda": {("kda_in_proj",): ("kda_q", "kda_k", "kda_v", "ssm_beta"), ("kda_conv",): ("conv",),
            ("kda_gates",): ("ssm_f_a", "ssm_f_b", "ssm_g_a", "ssm_g_b", "ssm_dt_bias", "ssm_a", "ssm_norm"),
            ("kda_out_proj",): ("kda_o",)},
    "mamba1": {**_SSM_IN_OUT, ("ssm_dt_bc", "ssm_heads"): ("ssm_x", "ssm_dt", "ssm_dt_bias", "ssm_a", "ssm_d")},
    "mamba2": {**_SSM_IN_OUT, ("ssm_heads",): ("ssm_dt_bias", "ssm_a", "ssm_d")},
    "lightning": {("lightning_in_proj",): ("ssm_in", "ssm_z"), ("lightning_norm",): ("ssm_norm",),
                  ("lightning_out_proj",): ("ssm_out",)},
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_parameter_has_a_declared_role(name):
    """The modules' declarations cover every parameter the model registers, each with a known kind; the roles'
    totals equal count_params' components (a recurrent mixer's where the model has one kind)."""
    cfg = CONFIGS[name]
    with torch.device("meta"):
        model = DecoderLM(cfg)
    assert set(declared_roles(model)) >= {n for n, _ in model.named_parameters()}
    tensors = param_tensors(cfg)
    assert {t.kind for t in tensors} <= set(KINDS) - {"adapter"}
    by_role: dict[str, int] = {}
    for t in tensors:
        by_role[t.role] = by_role.get(t.role, 0) + t.numel
    comps = count_params(cfg).components
    kinds = {k for s in cfg.layer_specs for k in s.mixers} - {"attention"}
    groups = {**COMMON, **(MIXERS[kinds.pop()] if len(kinds) == 1 else {})}   # two kinds share role names
    for components, roles in groups.items():
        assert sum(comps.get(c, 0) for c in components) == sum(by_role.get(r, 0) for r in roles), components


def test_a_hybrids_mixer_matrices_are_quantized_by_a_plain_scheme():
    """nemotron-h-8b under fp8 (1 B a value + a 4 B scale a tensor), counted from count_params' components: the
    attention, Mamba-2 and MLP matrices quantized (4 per attention layer, in_proj and out_proj per Mamba layer,
    up and down per MLP layer), embeddings, head, conv, A_log/D/dt_bias and norms in bf16."""
    cfg = PRESETS["nemotron-h-8b"].config
    c = count_params(cfg).components
    matrices = sum(c[k] for k in ("attention_q", "attention_k", "attention_v", "attention_o", "ssm_in", "ssm_out",
                                  "ffn"))
    layers = [s.mixers + ((s.ffn,) if s.ffn != "none" else ()) for s in cfg.layer_specs]
    n_matrices = sum(4 * l.count("attention") + 2 * l.count("mamba2") + 2 * l.count("dense") for l in layers)
    hand = matrices + 4 * n_matrices + 2 * (count_params(cfg).total - matrices)
    store = weight_storage(cfg, "fp8", "bf16")
    assert sum(store(t, t.shape)[0] for t in param_tensors(cfg)) == hand
    assert math.isclose(hand / count_params(cfg).total, 1.0, rel_tol=0.2)    # about 1 B a parameter, not 2
