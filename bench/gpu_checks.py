"""GPU checks for a ~1B model in bf16: measured latency, MFU against the device profile, and CUDA's peak memory
beside the closed-form estimate; decode-step latency vs context for MHA / GQA / MQA.

`python -m bench.gpu_checks` on a CUDA machine (unchanged script); on a machine without CUDA it says so and
exits 0. Prints Markdown rows ready for bench/RESULTS.md, with the device named.
"""
from __future__ import annotations

import sys

import torch

from engine.budget.params import count_params
from engine.guard import MemoryRefusal
from engine.layers.kv_heads import attention_variants
from engine.measure import latency as lat
from engine.measure.decode import measure_decode
from engine.presets import get_preset
from engine.units import fmt_bytes

# Llama-3.2-1B's shape: 16 layers of d_model 2048, 32 query / 8 key-value heads, SwiGLU 8192, tied 128k vocab.
CFG = get_preset("llama-3-8b").config.replace(name="llama-3.2-1b-like", d_model=2048, n_layers=16, n_heads=32,
                                              n_kv_heads=8, d_ff=8192, tie_embeddings=True)
SHAPES = ((1, 2048, "forward"), (8, 2048, "forward"), (4, 2048, "train"))
CONTEXTS = [128, 512, 2048, 8192]


def main() -> int:
    if not torch.cuda.is_available():
        print("gpu_checks: CUDA is not available on this machine; skipped (nothing measured).")
        return 0
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(dev)
    print(f"{CFG.name}: {count_params(CFG).total:,} params, bf16, on {name} "
          f"(peak from {lat.device_peak(dev, 'bf16')[1]}), torch {torch.__version__}\n")
    print("| batch x seq | timed | median ms | IQR ms | tokens/s | TFLOP/s | MFU | peak memory | estimate | gap |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for batch, seq, mode in SHAPES:
        try:
            model, _ = lat.prepare(CFG, batch, seq, "bf16", "cuda", mode)
        except MemoryRefusal as e:
            print(f"| {batch} x {seq} | {mode} | refused: {e} |")
            continue
        r = lat.measure(model, batch, seq, mode, budget_s=2.0)
        est, _ = lat.memory_estimate(CFG, batch, seq, "bf16", mode)
        mfu = r.mfu_text
        print(f"| {batch} x {seq} | {'fwd+bwd' if mode == 'train' else 'fwd'} | {r.median_ms:.2f} | {r.iqr_ms:.2f} | "
              f"{r.tokens_per_s:,.0f} | {r.achieved_tflops:.1f} | {mfu} | {fmt_bytes(r.peak_memory_bytes)} | "
              f"{fmt_bytes(est)} | {100 * (r.peak_memory_bytes - est) / est:+.1f}% |", flush=True)
        del model
        torch.cuda.empty_cache()
    print("\nDecode, batch 1: ms per new token with the KV cache already holding `context` tokens\n")
    print("| attention | " + " | ".join(f"ctx {c}" for c in CONTEXTS) + " | cache at the longest |")
    print("|---|" + "---:|" * (len(CONTEXTS) + 1))
    curves = measure_decode(attention_variants(CFG), CONTEXTS, 1, "bf16", "cuda", budget_s=2.0)
    for label, points in curves.items():     # the variants were timed in interleaved rounds at each context
        print(f"| {label} | " + " | ".join(f"{p.median_ms:.2f}{' (noisy)' if p.noisy else ''}" for p in points)
              + f" | {fmt_bytes(points[-1].cache_bytes)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
