"""The chunked recurrent rules' `want_state` default: a caller that leaves it out (a training forward, which
has no decode cache to fill) gets no final state and pays no FLOPs for one, exactly what each rule's FLOPs
closed form charges with final=False; asking for the state adds the one K^T U write the closed form charges
with final=True. A layer's FLOPs headline is the closed form, so a default that silently computed the state
would make every counted forward disagree with it."""
import pytest
import torch

from engine.layers import delta_rule, kda_rule, lightning
from engine.measure.flops import flop_counter

B, H, T, DK, DV, CHUNK = 1, 2, 10, 4, 3, 4


def _inputs(rule):
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(B, H, T, DK, generator=g) for _ in range(2))
    v = torch.randn(B, H, T, DV, generator=g)
    beta = torch.rand(B, H, T, generator=g)
    if rule is kda_rule.chunked:
        decay = -torch.rand(B, H, T, DK, generator=g)
    elif rule is lightning.chunked:
        decay, beta = -torch.rand(H, generator=g), None
    else:
        decay = -torch.rand(B, H, T, generator=g)
    return q, k, v, decay, beta


RULES = {"delta_rule": (delta_rule.chunked, delta_rule.chunked_flops),
         "kda_rule": (kda_rule.chunked, kda_rule.chunked_flops),
         "lightning": (lightning.chunked, lightning.block_flops)}


def _counted(call) -> tuple[int, object]:
    counter = flop_counter()
    with counter:
        out = call()
    return counter.get_total_flops(), out


@pytest.mark.parametrize("name", RULES)
def test_leaving_want_state_out_computes_no_final_state(name):
    rule, closed_form = RULES[name]
    args = _inputs(rule)
    left_out, (o, state) = _counted(lambda: rule(*args, CHUNK))
    spelled, (o2, _) = _counted(lambda: rule(*args, CHUNK, None, False))
    wanted, (o3, final) = _counted(lambda: rule(*args, CHUNK, want_state=True))
    assert state is None and final is not None and final.shape == (B, H, DK, DV)
    assert left_out == spelled == B * H * closed_form(T, CHUNK, DK, DV)
    assert wanted == B * H * closed_form(T, CHUNK, DK, DV, final=True) > left_out
    torch.testing.assert_close(o, o2)
    torch.testing.assert_close(o, o3)


@pytest.mark.parametrize("name", RULES)
def test_chunked_train_leaves_the_state_out_too(name):
    """delta_rule.chunked_train, the rules' training entry point: the same default, the same answer."""
    rule, _ = RULES[name]
    args = _inputs(rule)
    o, state = delta_rule.chunked_train(*args, CHUNK, rule=rule)
    o2, final = delta_rule.chunked_train(*args, CHUNK, want_state=True, rule=rule)
    assert state is None and final is not None
    torch.testing.assert_close(o, o2)
