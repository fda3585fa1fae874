"""Hybrid layer layouts (engine/layers/mixers.py): every mixture of layer kinds in tests/hybrid_cases.py HYBRIDS holds
its closed forms exactly against the built model (parameters, FLOPs with FlopCounterMode, saved bytes with
saved-tensor hooks, the decode cache's bytes), decodes with its cache to the full forward's logits, and a model of
one kind everywhere is the model it was before layer_types and ffn_types existed."""
from __future__ import annotations

import re

import pytest
import torch

from engine.budget.flops import flops_budget
from engine.budget.memory import kv_cache_bytes, memory_budget, state_bytes
from engine.budget.params import count_params
from engine.config import ConfigError, ModelConfig
from engine.layers.block import block_params
from engine.measure.activations import measure_activations
from engine.measure.flops import counted_flops
from engine.model import KVCache, build_model
from tests.hybrid_cases import HYBRID_BASE, hybrid_configs

HYBRIDS = hybrid_configs()
NAMES = list(HYBRIDS)


@pytest.mark.parametrize("name", NAMES)
def test_parameters_equal_the_built_model_layer_by_layer(name):
    cfg = HYBRIDS[name]
    model = build_model(cfg, device="meta")
    assert count_params(cfg).total == sum(p.numel() for p in model.parameters())
    for block, spec in zip(model.blocks, cfg.layer_specs):
        assert sum(block_params(cfg, spec).values()) == sum(p.numel() for p in block.parameters()), (name, spec)


@pytest.mark.parametrize("name", NAMES)
def test_flops_equal_flop_counter(name):
    cfg = HYBRIDS[name]
    forward, backward = counted_flops(cfg, 2, 11)
    est = flops_budget(cfg, 2, 11)
    assert (est.forward_flops, est.backward_flops) == (forward, backward)


@pytest.mark.parametrize("name", NAMES)
def test_a_decode_step_costs_batch_times_one_sequence(name):
    """Each sequence of a batch decodes its own token with its own state: the step's FLOPs (the Trade-offs and
    Latency pages' decode cost) are batch x one sequence's, for every mixer kind, recurrent ones included."""
    from engine.budget.flops import decode_flops
    cfg = HYBRIDS[name]
    assert decode_flops(cfg, 3, 9) == 3 * decode_flops(cfg, 1, 9)


@pytest.mark.parametrize("name", NAMES)
def test_every_norm_module_shows_the_configs_eps(name):
    """print(model) lists every norm with its eps; a norm whose weights a mixer applies itself (Jamba's dt, B, C
    norms) must still show the config's norm_eps it computes with (MLA's latent norms: mla_norm_eps), not
    torch's default."""
    cfg = HYBRIDS[name]
    model = build_model(cfg, device="meta")
    shown = {m.eps for m in model.modules() if hasattr(m, "eps")}
    assert shown and shown <= {cfg.norm_eps, cfg.mla_norm_eps} - {None}, shown


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", NAMES)
def test_saved_bytes_equal_saved_tensor_hooks(name, dtype):
    m = measure_activations(HYBRIDS[name], 2, 9, dtype=dtype)
    assert m.estimate == m.measured, name


@pytest.mark.parametrize("name", NAMES)
def test_decoding_with_the_cache_gives_the_full_forward_logits_and_the_cache_bytes(name):
    cfg = HYBRIDS[name]
    model = build_model(cfg, seed=1).eval()
    idx = torch.randint(0, cfg.vocab_size, (2, 10), generator=torch.Generator().manual_seed(2))
    cache = KVCache(cfg.n_layers)
    with torch.no_grad():
        full = model(idx)
        # a prompt, then pieces of two tokens, one and three: a chunk after the prompt (chunked prefill,
        # speculative decoding) starts from the cached state just as a one-token step does
        steps = [model(idx[:, a:b], cache) for a, b in ((0, 4), (4, 6), (6, 7), (7, 10))]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.kv_nbytes() == kv_cache_bytes(cfg, 2, 10, "fp32")
    assert cache.state_nbytes() == sum(state_bytes(cfg, 2, "fp32").values())


def test_kv_cache_counts_attention_layers_only_and_state_does_not_grow():
    cfg = HYBRIDS["qwen3-next 3:1, gated attention"]
    every = cfg.replace(layer_types=None)
    for tokens in (1, 100, 10_000):
        assert 4 * kv_cache_bytes(cfg, 1, tokens) == kv_cache_bytes(every, 1, tokens)
    assert state_bytes(cfg, 3) == {k: 3 * v for k, v in state_bytes(cfg, 1).items()}
    mb = memory_budget(cfg, 1, 64)
    assert mb.infer_total_bytes == mb.weights_bytes + mb.kv_cache_bytes + mb.state_bytes
    assert mb.states["vllm"]["total"] == mb.state_bytes and state_bytes(every, 1) == {"conv": 0, "recurrent": 0}


def test_one_kind_everywhere_is_the_model_it_was():
    """Spelling out layer_types and ffn_types as the defaults give them changes no weight, logit or budget."""
    base = ModelConfig(**{**HYBRID_BASE, "n_experts": 4, "moe_every": 2, "attn_window": 3, "global_every": 2})
    spelled = base.replace(layer_types=("sliding", "full", "sliding", "full"), ffn_types=("dense", "moe") * 2)
    a, b = build_model(base, seed=5), build_model(spelled, seed=5)
    assert a.state_dict().keys() == b.state_dict().keys()
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    idx = torch.randint(0, base.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(a(idx), b(idx), atol=0, rtol=0)
    assert count_params(base) == count_params(spelled)
    assert flops_budget(base, 2, 8) == flops_budget(spelled, 2, 8)
    assert not base.hybrid and not spelled.hybrid


# Mamba-2's rules: groups divide the heads, five projection scales (z, x, B, C, dt), dt limits in order
MAMBA2_RULES = [(dict(ssm_heads=4, ssm_groups=3), "ssm_groups: 3 does not divide ssm_heads=4"),
                (dict(ssm_proj_scales=(1.0, 2.0, 3.0)), "ssm_proj_scales: five scales (z, x, B, C, dt), got 3"),
                (dict(ssm_dt_min=0.2, ssm_dt_max=0.1), "ssm_dt_max: 0.1 is below ssm_dt_min=0.2")]


@pytest.mark.parametrize("changes, message", [
    (dict(layer_types=("gdn", "full")), "layer_types: 2 entries for n_layers=4"),
    (dict(ffn_types=("dense",) * 5), "ffn_types: 5 entries for n_layers=4"),
    (dict(layer_types=("none", "gdn", "full", "gdn"), ffn_types=("none", "dense", "dense", "dense")),
     "layer_types: layer 1 has no mixer and ffn_types gives it no FFN either"),
    (dict(block="parallel", ffn_types=("dense", "none", "dense", "dense")),
     "block: parallel needs a mixer and an FFN in every layer; layer 2 lacks one"),
    (dict(ffn_types=("dense", "moe", "dense", "dense")), "ffn_types: layer 2 is moe but n_experts is null"),
    (dict(layer_types=("gdn",) * 4, gdn_k_heads=3, gdn_v_heads=4), "gdn_v_heads: 4 is not a multiple of gdn_k_heads=3"),
    (dict(layer_types=("mamba9",) * 4), "layer_types: entry 1 of 4, 'mamba9', is not one of full, sliding"),
    (dict(attn_gate="head", kv_lora_rank=4), "attn_gate: the output gate is not modelled with MLA"),
    *[(dict(layer_types=("mamba2", "full") * 2, **fields), message) for fields, message in MAMBA2_RULES],
])
def test_rules_name_the_field(changes, message):
    with pytest.raises(ConfigError) as e:
        ModelConfig(**{**HYBRID_BASE, **changes})
    assert any(p.startswith(message) for p in e.value.problems), e.value.problems


@pytest.mark.parametrize("fields, message", MAMBA2_RULES)
def test_mamba2_rules_apply_only_when_a_layer_is_mamba2(fields, message):
    cfg = ModelConfig(**{**HYBRID_BASE, **fields})   # the fields are unused without a Mamba-2 layer: no problem
    with pytest.raises(ConfigError, match=re.escape(message)):
        cfg.replace(layer_types=("full", "mamba2", "full", "full"))


def test_gdn_rule_applies_only_when_a_layer_is_gdn():
    cfg = ModelConfig(**{**HYBRID_BASE, "gdn_k_heads": 3, "gdn_v_heads": 4})   # unused: no problem
    assert not cfg.uses("gdn")
    with pytest.raises(ConfigError, match="gdn_v_heads: 4 is not a multiple of gdn_k_heads=3"):
        cfg.replace(layer_types=("gdn", "full", "full", "full"))


def test_deploy_plan_holds_the_attention_kv_and_the_recurrent_state():
    """Inference on one GPU: the planner's cache is the attention layers' KV plus the recurrent state."""
    from engine.plan.memory import Layout, Setup, gpu_memory
    cfg = HYBRIDS["qwen3-next 3:1, gated attention"]
    got = gpu_memory(cfg, Layout(), Setup(mode="infer", micro_batch=3, seq=50, policy="bf16"))["kv_cache"]
    assert got == kv_cache_bytes(cfg, 3, 50, "bf16") + sum(state_bytes(cfg, 3, "bf16").values())


@pytest.mark.parametrize("state_dtype", [None, "fp32"])
@pytest.mark.parametrize("kind", ["gdn", "kda", "lightning", "mamba2", "mamba1"])
def test_a_bf16_models_decode_cache_holds_the_state_in_state_dtype(kind, state_dtype):
    """Every recurrent kind of a bf16 model keeps its state in state_dtype (None: bf16; KDA fp32 always, as vLLM)
    after a prompt and a decode step, so the cache is the size the memory budget reports."""
    cfg = ModelConfig(**{**HYBRID_BASE, "n_layers": 2, "layer_types": (kind, "full"), "state_dtype": state_dtype})
    model = build_model(cfg, seed=1, dtype=torch.bfloat16).eval()
    cache = KVCache(cfg.n_layers)
    with torch.no_grad():
        for a, b in ((0, 3), (3, 4)):
            model(torch.arange(a, b).repeat(2, 1), cache)
    assert cache.layers[0].recurrent.dtype == (torch.float32 if state_dtype or kind == "kda" else torch.bfloat16)
    assert cache.state_nbytes() == sum(state_bytes(cfg, 2, "bf16").values())


@pytest.mark.parametrize("tokens", [1, 5])
@pytest.mark.parametrize("kind", ["gdn", "kda", "lightning", "mamba2", "mamba1"])
def test_the_cache_measurement_runs_off_the_default_device(kind, tokens):
    """measure_kv_cache runs on the user's device (CUDA where there is one); meta stands in for any device but
    the CPU default. A one-token prompt (no cached state yet) and a prompt then a step both run there, every
    tensor a recurrent layer makes following its inputs, and measure what the budget says."""
    from engine.measure.kvcache import measure_kv_cache
    scales = {"ssm_proj_scales": (0.5, 1.5, 2.0, 0.25, 3.0)} if kind == "mamba2" else {}   # Falcon-H1's
    cfg = ModelConfig(**{**HYBRID_BASE, "n_layers": 2, "layer_types": (kind, kind), **scales})
    m = measure_kv_cache(cfg, 2, tokens, "bf16", device="meta")
    assert m.measured == m.estimate == sum(state_bytes(cfg, 2, "bf16").values())
