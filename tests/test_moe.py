"""Mixture of experts: config rules, routing against a dense few-line reference, counts, losses, dispatch cost."""
from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from engine.budget.params import count_params
from engine.config import ConfigError, ModelConfig
from engine.layers.moe import MoE, balance_loss, balanced_counts, z_loss
from engine.model import build_model


def check(cfg: ModelConfig) -> None:
    """Closed form against the meta-built model: total, the three MoE components, active."""
    with torch.device("meta"):
        model = build_model(cfg, device="meta")
    count = count_params(cfg)
    by = {"router": 0, "experts": 0, "shared": 0, "shared_gate": 0}
    for name, p in model.named_parameters():
        parts = name.split(".")
        if parts[2:3] == ["ffn"] and parts[3] in by:
            by[parts[3]] += p.numel()
    assert count.total == sum(p.numel() for p in model.parameters())
    c = count.components
    assert (c["router"], c["routed_experts"], c["shared_experts"]) == (
        by["router"], by["experts"], by["shared"] + by["shared_gate"])
    skipped = sum(sum(p.numel() for p in m.experts.parameters()) * (m.n_experts - m.k) // m.n_experts
                  for m in model.moe_layers())
    assert count.active == count.total - skipped and skipped > 0

TINY = dict(name="tiny-moe", vocab_size=11, context_length=8, d_model=8, n_layers=2, n_heads=2, norm="rmsnorm",
            norm_bias=False, bias=False, position="rope", ffn="swiglu", n_experts=4, experts_per_token=2,
            expert_d_ff=6)


def test_dense_config_is_unchanged():
    cfg = ModelConfig()
    assert cfg.n_experts is None and cfg.moe_layers == [False] * 12
    c = count_params(cfg)
    assert c.active == c.total == 124_439_808 and c.active_non_embedding == c.non_embedding
    assert c.components["router"] == c.components["shared_experts"] == c.components["routed_experts"] == 0


@pytest.mark.parametrize("changes, message", [
    (dict(experts_per_token=5), "experts_per_token: 5 is more than n_experts=4"),
    (dict(n_experts=6, router_groups=4), "router_groups: 4 does not divide n_experts=6"),
    (dict(router_groups=2, router_group_topk=3), "router_group_topk: 3 is more than router_groups=2"),
    (dict(router_groups=2, router_group_topk=1, experts_per_token=3), "experts_per_token: 3 is more than"),
    (dict(shared_expert_gate=True), "shared_expert_gate: there is no shared expert"),
    (dict(moe_first_dense=2), "moe_first_dense: with moe_every=1 no layer of n_layers=2 is MoE"),
    (dict(n_experts=0), "n_experts: 0 is not an integer >= 1, or null"),
    # the smallest grouping: 2 groups of 1 expert cannot take a sum of two best (DeepSeek-V3's group score)
    (dict(n_experts=2, experts_per_token=1, router_groups=2, router_group_topk=2),
     "router_groups: 2 groups of 1 expert; a group score sums its two best experts, so a group needs at least 2"),
])
def test_moe_rules_name_the_field(changes, message):
    with pytest.raises(ConfigError) as e:
        ModelConfig(**{**TINY, **changes})
    assert any(p.startswith(message) for p in e.value.problems), e.value.problems


def test_groups_of_one_expert_are_fine_when_a_group_scores_its_best_one():
    """DeepSeek-V2's group score (max) reads one expert: 2 groups of 1 expert is a valid router."""
    cfg = ModelConfig(**{**TINY, "n_experts": 2, "experts_per_token": 1, "router_groups": 2, "router_group_topk": 2,
                         "router_group_score": "max"})
    assert cfg.router_groups == 2


def test_layer_pattern_first_dense_and_every():
    cfg = ModelConfig(**{**TINY, "n_layers": 6, "moe_first_dense": 1, "moe_every": 2})
    assert cfg.moe_layers == [False, True, False, True, False, True]


MOE_VARIANTS = list(itertools.product(("softmax_topk", "topk_softmax", "sigmoid"), ("swiglu", "gelu"),
                                      (None, 2), (False, True), (False, True)))


@pytest.mark.parametrize("router, ffn, shared, gate, bias", MOE_VARIANTS)
def test_every_moe_combination_counts_exactly(router, ffn, shared, gate, bias):
    if gate and not shared:
        return
    cfg = ModelConfig(**{**TINY, "n_layers": 3, "moe_first_dense": 1, "router": router, "ffn": ffn,
                         "n_shared_experts": shared, "shared_d_ff": 5, "shared_expert_gate": gate,
                         "expert_bias": bias, "router_selection_bias": router == "sigmoid"})
    check(cfg)


def test_active_is_the_textbook_sum():
    cfg = ModelConfig(**{**TINY, "n_shared_experts": 1, "shared_expert_gate": True, "tie_embeddings": False})
    c = count_params(cfg)
    d, f, E, k, L, V = 8, 6, 4, 2, 2, 11
    expert = 3 * d * f
    assert c.components["routed_experts"] == L * E * expert
    assert c.components["router"] == L * E * d and c.components["shared_experts"] == L * (3 * d * f + d)
    assert c.total - c.active == L * (E - k) * expert
    assert c.active == 2 * V * d + sum(
        c.components[n] for n in ("attention_q", "attention_k", "attention_v", "attention_o", "norms", "router",
                                  "shared_experts")) + L * k * expert


def reference_moe(moe: MoE, cfg: ModelConfig, x: torch.Tensor) -> torch.Tensor:
    """Every expert on every token, masked by the routing weights: the slow, obvious formula."""
    r, ex = moe.router, moe.experts
    logits = x @ r.weight.T + (r.bias if r.bias is not None else 0)
    E, k = cfg.n_experts, cfg.experts_per_token
    if cfg.router == "topk_softmax":
        top, idx = logits.topk(k, -1)
        w = torch.zeros_like(logits).scatter(1, idx, top.softmax(-1))
    else:
        s = logits.softmax(-1) if cfg.router == "softmax_topk" else logits.sigmoid()
        choice = s + (r.selection_bias if r.selection_bias is not None else 0)
        if cfg.router_groups > 1:
            g = choice.view(len(x), cfg.router_groups, -1)
            best = g.topk(2, -1)[0].sum(-1).topk(cfg.router_group_topk, -1)[1]
            mask = torch.zeros(len(x), cfg.router_groups).scatter(1, best, 1.0).repeat_interleave(E // cfg.router_groups, 1)
            choice = choice.masked_fill(mask == 0, float("-inf"))   # experts outside the best groups: never
        idx = choice.topk(k, -1)[1]
        kept = s.gather(1, idx)
        kept = kept / kept.sum(-1, keepdim=True) if cfg.router_renorm else kept
        w = torch.zeros_like(s).scatter(1, idx, kept * cfg.routed_scale)
    y = torch.zeros_like(x)
    for e in range(E):
        h = F.silu(x @ ex.gate[e].T) * (x @ ex.up[e].T)
        y = y + w[:, e:e + 1] * (h @ ex.down[e].T)
    if moe.shared is not None:
        s = moe.shared(x)
        y = y + (torch.sigmoid(moe.shared_gate(x)) * s if moe.shared_gate is not None else s)
    return y


@pytest.mark.parametrize("changes", [
    dict(), dict(router_renorm=False), dict(router="topk_softmax"),
    dict(n_shared_experts=2, shared_expert_gate=True),
    dict(router="sigmoid", router_selection_bias=True, n_experts=8, experts_per_token=3, router_groups=4,
         router_group_topk=2, routed_scale=2.5, n_shared_experts=1),
])
def test_moe_layer_matches_the_dense_reference(changes):
    cfg = ModelConfig(**{**TINY, **changes})
    torch.manual_seed(0)
    moe = MoE(cfg)
    with torch.no_grad():
        for p in moe.parameters():
            p.normal_()
        if moe.router.selection_bias is not None:
            moe.router.selection_bias.normal_()
    x = torch.randn(3, 5, cfg.d_model)
    ours = moe(x)
    assert torch.allclose(ours, reference_moe(moe, cfg, x.reshape(-1, 8)).reshape(x.shape), atol=1e-5)
    assert int(moe.load.sum()) == 15 * cfg.experts_per_token


def test_dispatch_computes_only_the_chosen_experts():
    """FLOPs of the expert matmuls = 2 * N*k * 3*d*f, not N*E: the k chosen experts per token only."""
    cfg = ModelConfig(**{**TINY, "n_experts": 8, "experts_per_token": 2})
    moe = MoE(cfg)
    with torch.no_grad():
        for p in moe.parameters():
            p.normal_()
    N, d, f = 10, 8, 6
    with FlopCounterMode(display=False) as counter:
        moe(torch.randn(N, d))
    assert counter.get_total_flops() == 2 * N * 8 * d + 2 * N * 2 * 3 * d * f


def test_balance_loss_is_k_when_balanced_and_matches_the_switch_formula():
    N, E, k = 8, 4, 2
    logits = torch.zeros(N, E)                                # uniform probabilities
    idx = torch.tensor([[0, 1], [2, 3]] * 4)                  # every expert chosen N*k/E times
    assert balance_loss(logits, idx, E).item() == pytest.approx(k)
    logits = torch.randn(N, E, generator=torch.Generator().manual_seed(1))
    idx = logits.topk(k, -1)[1]
    f = torch.tensor([(idx == e).sum().item() / N for e in range(E)])
    P = logits.softmax(-1).mean(0)
    assert balance_loss(logits, idx, E).item() == pytest.approx(E * float((f * P).sum()))
    assert z_loss(logits).item() == pytest.approx(float((torch.logsumexp(logits, -1) ** 2).mean()))


def test_balanced_counts_spread_the_assignments_as_evenly_as_possible():
    """The meta device's stand-in routing: sizes differ by at most one, the first experts take the remainder."""
    assert balanced_counts(8, 4) == [2, 2, 2, 2]
    assert balanced_counts(10, 4) == [3, 3, 2, 2]
    assert balanced_counts(3, 8) == [1, 1, 1, 0, 0, 0, 0, 0]


def test_model_returns_router_losses_in_training_only():
    model = build_model(ModelConfig(**{**TINY, "z_loss_coef": 0.001}))
    idx = torch.randint(0, 11, (2, 6))
    model.eval()
    model(idx)
    assert model.moe_losses() == {}
    model.train()
    model(idx)
    losses = model.moe_losses()
    layers = model.moe_layers()
    assert len(layers) == 2
    aux = sum(m.aux_loss for m in layers) / 2
    assert losses["aux_loss"].item() == pytest.approx(aux.item())
    assert losses["regularizer"].item() == pytest.approx(0.01 * aux.item() + 0.001 * losses["z_loss"].item())


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("changes", [
    dict(), dict(router_renorm=False), dict(router="topk_softmax"),
    dict(router="sigmoid", router_selection_bias=True, n_experts=8, router_groups=4, router_group_topk=2,
         routed_scale=2.5),
    dict(n_shared_experts=1, shared_expert_gate=True, expert_bias=True), dict(n_shared_experts=2, ffn="gelu"),
    dict(ffn="relu", moe_first_dense=1, n_layers=3), dict(ffn="reglu"),
    dict(qk_norm=True, qk_norm_scope="all_heads"), dict(qk_norm=True, qk_norm_scope="all_heads", rope_fraction=0.5),
    # Llama 4: top-1 sigmoid weight on the expert's input, a shared expert
    dict(router="sigmoid", router_renorm=False, router_scales_input=True, experts_per_token=1, n_shared_experts=1),
    dict(router_scales_input=True, ffn="gelu"),
])
def test_activation_estimate_equals_saved_tensor_measurement(changes, dtype):
    """Exact on CPU: the expert tensors sum to N*k rows whatever the routing, so the real (unbalanced) loads
    of this batch and balanced routing give the same bytes."""
    from engine.measure.activations import measure_activations
    m = measure_activations(ModelConfig(**{**TINY, **changes}), batch=2, seq=8, dtype=dtype)
    assert m.estimate == m.measured


def test_activation_bytes_do_not_depend_on_the_routing():
    """All tokens to one expert (router rows forced) saves exactly what the balanced closed form says."""
    from engine.budget.activations import activation_estimate
    from engine.measure.activations import saved_bytes
    cfg = ModelConfig(**TINY)
    model = build_model(cfg).train()
    with torch.no_grad():
        for m in model.moe_layers():
            m.router.weight.zero_()
            m.router.weight[0].fill_(5.0)   # expert 0 (and ties) win for every positive-sum token
    idx, targets = torch.randint(0, 11, (2, 2, 8), generator=torch.Generator().manual_seed(0))
    assert saved_bytes(model, idx, targets) == activation_estimate(cfg, 2, 8, "fp32").total
    assert max(int(m.load.max()) for m in model.moe_layers()) > 2 * 16 // 4   # the loads really were skewed


@pytest.mark.parametrize("changes", [dict(), dict(n_shared_experts=1, shared_expert_gate=True, moe_first_dense=1,
                                                 n_layers=3), dict(router="sigmoid", ffn="gelu", expert_bias=True)])
def test_flops_closed_form_equals_flop_counter(changes):
    """Forward and backward FLOPs follow active parameters (router included), as FlopCounterMode counts on the
    meta device (where routing is assumed balanced; the matmul FLOPs only depend on N*k)."""
    from engine.measure.flops import measure_flops
    for m in measure_flops(ModelConfig(**{**TINY, **changes}), batch=2, seq=8).values():
        assert m.estimate == m.measured


def test_memory_and_flops_json_for_mixtral(capsys):
    """Weights from the total (46,702,792,704 * 2 B in bf16), FLOPs from the active matrix params by hand:
    per layer attention 2*4096^2 + 2*4096*1024, router 8*4096, two experts 2*3*4096*14336; head 32000*4096."""
    import json
    from engine.cli import main
    assert main(["memory", "--preset", "mixtral-8x7b", "--json"]) == 0
    mem = json.loads(capsys.readouterr().out)
    assert mem["weights_bytes"] == 46_702_792_704 * 2 and mem["grads_bytes"] == 46_702_792_704 * 2
    assert mem["optimizer_bytes"] == 46_702_792_704 * 2 * 4
    assert main(["flops", "--preset", "mixtral-8x7b", "--json", "--batch", "1", "--seq", "128"]) == 0
    flops = json.loads(capsys.readouterr().out)
    active_matrix = 32 * (2 * 4096 ** 2 + 2 * 4096 * 1024 + 8 * 4096 + 2 * 3 * 4096 * 14336) + 32000 * 4096
    assert active_matrix == 12_748_587_008
    assert flops["matmul_flops"] == 2 * active_matrix * 128
    assert flops["six_n_per_token"] == 6 * 12_617_781_248


def test_dense_counterpart_has_the_moe_active_parameters_minus_the_router():
    from engine.layers.moe import dense_counterpart
    from engine.presets import PRESETS
    moe = PRESETS["mixtral-8x7b"].config
    dense = dense_counterpart(moe)
    assert dense.n_experts is None and dense.ffn_width == 2 * 14336
    assert count_params(dense).total == count_params(dense).active == 12_879_925_248 - 32 * 8 * 4096


@pytest.mark.parametrize("preset", ["qwen1.5-moe-a2.7b", "olmoe-1b-7b", "qwen3-30b-a3b", "deepseek-v3"])
def test_dense_counterpart_drops_only_the_router_and_the_shared_gate(preset):
    """Active minus, per MoE layer, the router E*d and the shared-expert gate d: exact for presets whose experts
    have no biases and whose dense layers (DeepSeek-V3's first three: 18,432 = 8*2,048 + 2,048) are that wide."""
    from engine.layers.moe import dense_counterpart
    from engine.presets import PRESETS
    moe = PRESETS[preset].config
    dense = dense_counterpart(moe)
    dropped = sum(moe.moe_layers) * (moe.n_experts * moe.d_model + (moe.d_model if moe.shared_expert_gate else 0))
    assert count_params(dense).total == count_params(dense).active == count_params(moe).active - dropped


def test_dense_counterpart_resets_every_moe_field():
    """Every MoE knob back to its dense default, the width k*expert_d_ff + n_shared*shared_d_ff, and the experts'
    biases kept as the dense FFN's: the whole config, field by field."""
    from engine.layers.moe import dense_counterpart
    moe = ModelConfig(name="tiny", vocab_size=64, context_length=16, d_model=32, n_layers=4, n_heads=4, bias=False,
                      ffn="swiglu", d_ff=112, n_experts=4, experts_per_token=2, expert_d_ff=32, n_shared_experts=1,
                      shared_d_ff=48, shared_expert_gate=True, moe_first_dense=1, moe_every=2, expert_bias=True)
    assert moe.moe_layers == [False, True, False, True] and not moe.bias
    dense = dense_counterpart(moe)
    assert dense.to_dict() == {**moe.to_dict(), "name": "tiny-dense-equal-active", "n_experts": None,
                               "d_ff": 2 * 32 + 48, "expert_d_ff": None, "n_shared_experts": None,
                               "shared_d_ff": None, "shared_expert_gate": False, "moe_first_dense": None,
                               "moe_every": 1, "bias": True, "expert_bias": False}
    assert dense.moe_layers == [False] * 4   # built, so valid
