"""Our Mamba-2 layer (engine/layers/mamba2.py) vs transformers' Mamba2Mixer torch fallback (no mamba_ssm, no
causal_conv1d: what runs on CPU), with the same weights: the chunked forward and a train step (forward + loss +
backward), interleaved in one process so both see the same load. Goal on CPU: ours <= 1.0x transformers' time.

Ours keeps only in_proj's output for backward and runs the conv, scan and norm again there (as the fused
kernels do), so its train step does one more forward of the scan than transformers', which keeps every
intermediate: a fairer memory picture, paid for in time."""
from __future__ import annotations

import os
import statistics

import torch

from bench.bench_vs_hf import interleaved
from engine.layers.mamba2 import Mamba2, Mamba2Dims

GOAL = 1.0
# Mamba-2-370m's mixer (d_model 1024, 32 heads of 64, state 128, one group, chunk 256) at d_model 768
DIMS = Mamba2Dims(d_model=768, heads=24, head_dim=64, state=128, groups=1, conv_kernel=4, chunk=256)
WORKLOADS = ((1, 512, 7), (2, 2048, 5))   # (batch, seq, rounds)


def _hf_mixer():
    from transformers import Mamba2Config
    from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer
    d = DIMS
    cfg = Mamba2Config(hidden_size=d.d_model, num_heads=d.heads, head_dim=d.head_dim, state_size=d.state,
                       n_groups=d.groups, conv_kernel=d.conv_kernel, chunk_size=d.chunk,
                       expand=d.d_inner // d.d_model, num_hidden_layers=1, layer_norm_epsilon=d.norm_eps)
    return Mamba2Mixer(cfg, 0)


def _forward(m, x):
    with torch.no_grad():
        m(x)


def _train_step(m, x):
    m.zero_grad(set_to_none=True)
    m(x.detach().requires_grad_()).square().mean().backward()


def main() -> None:
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    hf = _hf_mixer()
    ours = Mamba2(DIMS)
    ours.load_state_dict(hf.state_dict())
    print(f"Mamba-2 layer {DIMS}; torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}")
    print("| workload | what | ours (median) | transformers (median) | ratio | goal <= 1.0x |")
    print("|---|---|---:|---:|---:|---|")
    for batch, seq, rounds in WORKLOADS:
        x = torch.randn(batch, seq, DIMS.d_model, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            gap = (ours(x) - hf(x)).abs().max().item()
        for what, fn in (("forward", _forward), ("train step", _train_step)):
            times = interleaved({"ours": lambda: fn(ours, x), "hf": lambda: fn(hf, x)}, rounds)
            a, b = statistics.median(times["ours"]), statistics.median(times["hf"])
            print(f"| B={batch}, T={seq} | {what} | {a * 1e3:,.1f} ms | {b * 1e3:,.1f} ms | {a / b:.2f}x | "
                  f"{'met' if a / b <= GOAL else 'not met'} |", flush=True)
        print(f"(max |output gap| {gap:.1e}; load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
