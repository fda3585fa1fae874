"""Our Gated DeltaNet layer (engine/layers/gdn.py, chunked form) vs transformers' Qwen3_5GatedDeltaNet on CPU, where
it runs its torch fallbacks (torch_chunk_gated_delta_rule, torch_causal_conv1d_update's full-sequence path): the
same weights (a Qwen3.5-shaped model converted with engine.interop.to_transformers, layer 0 of each), forward and
train step (forward + mean square + backward), interleaved in one process so both see the same load.
Goal (issue 23): ours <= 1.0x transformers' time."""
from __future__ import annotations

import os
import warnings

import torch

from bench.bench_vs_hf import ratio_row
from engine.model import build_model
from engine.presets import get_preset

GOAL = 1.0
WORKLOADS = ((1, 512, 9), (4, 256, 7))   # (batch, seq, rounds)
# Qwen3.5's Gated DeltaNet at CPU size: 8 key heads of 64, 16 value heads of 64, kernel 4, chunk 64
CFG = get_preset("qwen3.5-9b").config.replace(
    name="qwen3.5-gdn-small", vocab_size=1000, context_length=1024, d_model=512, n_layers=4, n_heads=8,
    n_kv_heads=2, d_ff=1024, layer_types=("gdn", "gdn", "gdn", "full"), gdn_k_heads=8, gdn_v_heads=16,
    gdn_k_dim=64, gdn_v_dim=64)


def _forward(layer, x):
    with torch.no_grad():
        layer(x)


def _train_step(layer, x):
    layer.zero_grad(set_to_none=True)
    layer(x).square().mean().backward()


def main() -> None:
    import transformers

    from engine.interop import to_transformers
    transformers.logging.set_verbosity_error()
    warnings.simplefilter("ignore")         # transformers' "fast path is not available" notice
    torch.manual_seed(0)
    ours_model = build_model(CFG, seed=0)
    hf_model = to_transformers(ours_model)
    ours, hf = ours_model.blocks[0].gdn, hf_model.model.layers[0].linear_attn
    load = os.getloadavg()
    print(f"{CFG.name}: Gated DeltaNet d_model {CFG.d_model}, {CFG.gdn_k_heads} key heads / {CFG.gdn_v_heads} value "
          f"heads of {CFG.gdn_k_dim}, kernel {CFG.gdn_conv_kernel}, chunk {CFG.gdn_chunk}; torch {torch.__version__}, "
          f"transformers {transformers.__version__}, {torch.get_num_threads()} threads; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"| workload | what | ours (median) | transformers (median) | ratio | goal <= {GOAL}x |")
    print("|---|---|---:|---:|---:|---|")
    for batch, seq, rounds in WORKLOADS:
        x = torch.randn(batch, seq, CFG.d_model, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            gap = (ours(x) - hf(x)).abs().max().item()
        for what, fn in (("forward", _forward), ("train step", _train_step)):
            ratio_row(f"B={batch}, T={seq}", what, lambda: fn(ours, x), lambda: fn(hf, x), rounds, GOAL)
        print(f"(max |output gap| {gap:.1e})")


if __name__ == "__main__":
    main()
