"""Group-limited routing chooses only inside the best groups, as transformers' DeepseekV3TopkRouter does (experts
outside them masked with -inf), also when a negative selection bias makes every choice score negative: zeroing
those experts instead would pick them, since 0 beats every negative score."""
import pytest
import torch

from engine.config import ModelConfig
from engine.layers.moe import Router

transformers = pytest.importorskip("transformers", minversion="5.0")
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3TopkRouter  # noqa: E402

E, G, K, D = 8, 4, 2, 16


def _pair():
    cfg = ModelConfig(d_model=D, n_experts=E, experts_per_token=K, router="sigmoid", router_selection_bias=True,
                      router_groups=G, router_group_topk=1, routed_scale=2.5)
    hf_cfg = transformers.DeepseekV3Config(hidden_size=D, n_routed_experts=E, num_experts_per_tok=K, n_group=G,
                                           topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True)
    ours, theirs = Router(cfg), DeepseekV3TopkRouter(hf_cfg)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        theirs.weight.copy_(torch.randn(E, D, generator=g))
        theirs.e_score_correction_bias.copy_(-1.0 - torch.rand(E, generator=g))   # every choice score < 0
        ours.weight.copy_(theirs.weight)
        ours.selection_bias.copy_(theirs.e_score_correction_bias)
    return ours, theirs


def test_negative_bias_choices_equal_transformers_and_stay_in_the_best_group():
    ours, theirs = _pair()
    x = torch.randn(64, D, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, w, idx = ours(x)
        _, hf_w, hf_idx = theirs(x)
    order, hf_order = idx.sort(-1), hf_idx.sort(-1)
    assert torch.equal(order.values, hf_order.values)
    assert torch.allclose(w.gather(1, order.indices), hf_w.gather(1, hf_order.indices), atol=1e-6)
    # with one group kept, both experts of each token come from the same group of E/G = 2
    assert torch.equal(idx.min(-1).values // (E // G), idx.max(-1).values // (E // G))
    # zeroing the other groups (the old rule) would have chosen differently for these tokens
    choice = (x @ ours.weight.T).sigmoid() + ours.selection_bias
    grouped = choice.view(len(x), G, -1)
    best = grouped.topk(2, -1)[0].sum(-1).topk(1, -1)[1]
    zeroed = (grouped * torch.zeros(len(x), G, 1).scatter(1, best.unsqueeze(-1), 1.0)).view_as(choice)
    assert not torch.equal(zeroed.topk(K, -1)[1].sort(-1).values, hf_order.values)
