"""Checks of one layer on its own, shared by the recurrent mixers' tests (test_mamba1/2.py, test_gdn.py,
test_kda.py, test_lightning.py): its saved-tensor bytes, a hand count of an update's FLOPs, FlopCounterMode on the
meta device, and equality with transformers' layer (outputs and every gradient)."""
from __future__ import annotations

# ---- one layer measured on its own (the recurrent mixers' tests) ---------------------------------------------
def module_saved_bytes(module, x) -> int:
    """Bytes of the distinct storages autograd saves in module(x), its parameters and its input x excluded (the
    input belongs to whoever made it), each storage at its full size as engine.measure.activations counts them."""
    import torch
    skip = {p.untyped_storage().data_ptr() for p in module.parameters()} | {x.untyped_storage().data_ptr()}
    seen: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in skip:
            seen[s.data_ptr()] = max(seen.get(s.data_ptr(), 0), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x)
    return sum(seen.values())


def hand_counted_flops(fn, *args) -> int:
    """FLOPs of fn(*args) counted op by op the way a hand count goes: one per output element of an elementwise
    multiply, add, subtract, divide or exp, 2*m*n*k for a (batched) matrix product, nothing for views, copies
    and index shuffles. Any other op with floating-point output fails the count, so nothing slips by."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    elementwise = {aten.mul.Tensor, aten.add.Tensor, aten.sub.Tensor, aten.div.Tensor, aten.exp.default}
    free = {aten.view.default, aten.unsqueeze.default, aten.squeeze.dim, aten.expand.default, aten.clone.default,
            aten._unsafe_view.default, aten.repeat_interleave.self_int, aten.index_select.default,
            aten.reshape.default, aten.slice.Tensor, aten.select.int, aten._to_copy.default, aten.copy_.default,
            aten.squeeze.dims, aten.repeat_interleave.Tensor}

    class Count(TorchDispatchMode):
        flops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in elementwise:
                Count.flops += out.numel()
            elif func is aten.bmm.default:
                (b, m, k), n = args[0].shape, args[1].shape[-1]
                Count.flops += 2 * b * m * n * k
            elif func not in free and isinstance(out, torch.Tensor) and out.is_floating_point():
                raise AssertionError(f"no hand-count rule for {func}")
            return out

    with Count():
        fn(*args)
    return Count.flops


def redrawn(module, seed: int, std: float = 0.3):
    """The module with every parameter drawn again, N(0, std) from a seeded generator (so each one matters)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return module


def meta_flops(module, batch: int, seq: int) -> tuple[int, int]:
    """(forward, backward) FLOPs that FlopCounterMode, with the engine's formulas (engine/measure/flops.py: a
    depthwise conv's gradient as what it is), counts for module on a meta input [batch, seq, d_model], the loss
    being the output's sum."""
    import torch

    from engine.measure.flops import flop_counter
    m = module.to("meta")
    x = torch.empty(batch, seq, m.dims.d_model, device="meta", requires_grad=True)
    counter = flop_counter()
    with counter:
        y = m(x)
        forward = counter.get_total_flops()
        y.sum().backward()
    return forward, counter.get_total_flops() - forward


def assert_same_layer(hf, ours, x, renamed=lambda name: name) -> None:
    """A transformers layer and ours on the same input [B, T, d]: outputs within 1e-5 of the output's scale,
    then the input's and every parameter's gradients (loss sum(y * y_hf)) within 1e-4; `renamed` maps an HF
    parameter name to ours."""
    import torch
    x_hf, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    y_hf, y_ours = hf(x_hf), ours(x_ours)
    torch.testing.assert_close(y_ours, y_hf, rtol=0, atol=1e-5 * y_hf.abs().max().item())
    (y_hf * y_hf.detach()).sum().backward()
    (y_ours * y_hf.detach()).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_hf.grad, rtol=1e-4, atol=1e-4 * x_hf.grad.abs().max().item())
    ref = {renamed(n): p for n, p in hf.named_parameters()}
    for name, p in ours.named_parameters():
        scale = ref[name].grad.abs().max().item()
        torch.testing.assert_close(p.grad, ref[name].grad, rtol=1e-4, atol=1e-4 * scale, msg=name)
