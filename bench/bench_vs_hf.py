"""Our DecoderLM vs Hugging Face transformers' LlamaForCausalLM: the same weights (converted with
engine.interop.to_transformers), the same input, forward and train-step (forward + cross-entropy + backward)
time, interleaved in one process so both see the same machine load. Goal on CPU: ours <= 0.9x HF for both.
The ratio of medians is the figure; the ratio of the best runs is printed beside it because on a shared
machine a load spike can hit one contender's rounds more than the other's."""
from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from engine.model import build_model
from engine.presets import get_preset

GOAL = 0.9
# (batch, seq, rounds): a latency-bound call, where per-call framework overhead shows, and a throughput-bound
# one, where both spend most of the time in the same matmul kernels.
WORKLOADS = ((1, 64, 21), (4, 256, 9))
# Llama-3's architecture (RMSNorm, SwiGLU, RoPE, GQA, untied head) at a size a CPU times in ~0.1 s per call.
CFG = get_preset("llama-3-8b").config.replace(name="llama-3-small", vocab_size=32000, context_length=1024,
                                              d_model=512, n_layers=4, n_heads=8, n_kv_heads=2, d_ff=1536)


def _forward(model, idx, hf: bool):
    with torch.no_grad():
        out = model(idx)
        return out.logits if hf else out


def _train_step(model, idx, hf: bool):
    """Next-token cross-entropy on the full logits (targets shifted, last position ignored) and backward."""
    model.zero_grad(set_to_none=True)
    out = model(idx)
    logits = out.logits if hf else out
    targets = idx.roll(-1, dims=1)
    targets[:, -1] = -100
    F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100).backward()


def interleaved(fns: dict[str, callable], rounds: int) -> dict[str, list[float]]:
    """Alternate the contenders each round (order flipped every round) so load spikes hit both alike."""
    times = {k: [] for k in fns}
    names = list(fns)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            t = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - t)
    return times


def ratio_row(workload: str, what: str, ours: callable, theirs: callable, rounds: int, goal: float) -> float:
    """Time `ours` against `theirs` in interleaved rounds and print one Markdown row: medians, ratio, goal met?"""
    times = interleaved({"ours": ours, "theirs": theirs}, rounds)
    a, b = statistics.median(times["ours"]), statistics.median(times["theirs"])
    print(f"| {workload} | {what} | {a * 1e3:,.1f} ms | {b * 1e3:,.1f} ms | {a / b:.2f}x | "
          f"{'met' if a / b <= goal else 'not met'} |", flush=True)
    return a / b


def main() -> None:
    from engine.interop import to_transformers
    import transformers

    torch.manual_seed(0)
    ours = build_model(CFG, seed=0).eval()
    hf = to_transformers(ours, attn_implementation="sdpa").eval()
    probe = torch.randint(CFG.vocab_size, (2, 64), generator=torch.Generator().manual_seed(0))
    gap = (_forward(ours, probe, False) - _forward(hf, probe, True)).abs().max().item()
    print(f"{CFG.name}: {sum(p.numel() for p in ours.parameters()):,} params, fp32, torch {torch.__version__}, "
          f"transformers {transformers.__version__}, {torch.get_num_threads()} threads; {type(hf).__name__} "
          f"(sdpa) with the same weights, max |logit gap| {gap:.2e}")
    for batch, seq, rounds in WORKLOADS:
        idx = torch.randint(CFG.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(1))
        for phase, step in (("forward (no grad)", _forward), ("train step (fwd + CE + bwd)", _train_step)):
            for m in (ours, hf):
                m.train(phase.startswith("train"))
            fns = {"ours": lambda: step(ours, idx, False), "hf": lambda: step(hf, idx, True)}
            for f in fns.values():   # warm-up
                f()
            times = interleaved(fns, rounds)
            med = {k: statistics.median(v) for k, v in times.items()}
            best = {k: min(v) for k, v in times.items()}
            ratio = med["ours"] / med["hf"]
            print(f"  batch {batch} x seq {seq:<4} {phase:<28} median ours {med['ours'] * 1e3:7.1f} ms, HF "
                  f"{med['hf'] * 1e3:7.1f} ms: {ratio:.2f}x (best of {rounds}: {best['ours'] / best['hf']:.2f}x)   "
                  f"goal <= {GOAL}x: {'met' if ratio <= GOAL else 'MISSED'}", flush=True)


if __name__ == "__main__":
    main()
