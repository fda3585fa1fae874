"""FLOPs as torch.utils.flop_counter.FlopCounterMode counts them, for one forward + cross-entropy + backward.

Counted on the meta device: nothing is allocated (a 70B model costs nothing), and there SDPA dispatches to
its math composite, whose two batched matmuls (QK^T, PV) FlopCounterMode does count. On a real CPU tensor the
fused kernel (_scaled_dot_product_flash_attention_for_cpu) has no FLOP formula and would count 0.

Two formulas are added to torch's (`FLOP_FORMULAS`, for every counter here): the unit triangular solve of the
chunked gated delta rule (no torch formula; engine/layers/delta_rule.py solve_flops, checked against a hand
count of forward substitution in tests/test_gdn.py), and the backward of a grouped (depthwise) convolution,
which torch's formula counts as if every input channel met every output channel (C times too many for the
short convolutions of recurrent mixers); a grouped conv's backward is one forward's products per gradient.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, conv_backward_flop

from engine.budget.flops import flops_budget
from engine.config import ModelConfig
from engine.layers.delta_rule import solve_flops
from engine.measure import Measurement
from engine.model import build_model

aten = torch.ops.aten


def _solve_triangular_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """linalg_solve_triangular(A [..., c, c], B [..., c, m]): forward substitution per matrix in the batch."""
    *batch, c, _ = a_shape
    return math.prod(batch) * solve_flops(c, b_shape[-1])


def _conv_backward_flops(grad_out_shape, x_shape, w_shape, bias, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask, out_shape=None, **kwargs) -> int:
    """Grouped convolutions: each requested gradient (input, weight) costs the forward's products,
    2 * B * C_out * (C_in / groups) * prod(kernel) * prod(output positions). Others: torch's formula."""
    if groups == 1 or transposed:
        return conv_backward_flop(grad_out_shape, x_shape, w_shape, bias, stride, padding, dilation, transposed,
                                  output_padding, groups, output_mask, out_val=out_shape)
    forward = 2 * grad_out_shape[0] * math.prod(w_shape) * math.prod(grad_out_shape[2:])
    return forward * (int(output_mask[0]) + int(output_mask[1]))


FLOP_FORMULAS = {aten.linalg_solve_triangular: _solve_triangular_flops,
                 aten.convolution_backward: _conv_backward_flops}


def flop_counter() -> FlopCounterMode:
    """FlopCounterMode with this engine's two added formulas (see the module docstring)."""
    return FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS)


def counted_flops(cfg: ModelConfig, batch: int, seq: int, impl: str = "sdpa") -> tuple[int, int]:
    """(forward, backward) FLOPs counted by FlopCounterMode on a meta-device model."""
    model = build_model(cfg, device="meta")
    model.train()
    model.set_attention(impl)
    idx = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    counter = flop_counter()
    with counter:
        loss = F.cross_entropy(model(idx).flatten(0, 1), idx.flatten())
        forward = counter.get_total_flops()
        loss.backward()
    return forward, counter.get_total_flops() - forward


def measure_flops(cfg: ModelConfig, batch: int, seq: int, impl: str = "sdpa") -> dict[str, Measurement]:
    """Closed-form forward and backward FLOPs beside FlopCounterMode's count."""
    fwd, bwd = counted_flops(cfg, batch, seq, impl)
    est = flops_budget(cfg, batch, seq)
    how = f"FlopCounterMode on the meta device, {impl} attention"
    return {"forward_flops": Measurement("forward FLOPs", est.forward_flops, fwd, how),
            "backward_flops": Measurement("backward FLOPs", est.backward_flops, bwd, how)}
