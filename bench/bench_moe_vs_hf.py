"""Our MoE DecoderLM vs transformers' Qwen3MoeForCausalLM with the same weights (converted with
engine.interop.to_transformers): forward and train step (forward + cross-entropy + backward), interleaved in one
process so both see the same machine load. Goal on CPU: ours <= 0.8x transformers' time.

Both dispatch by expert; transformers finds each expert's tokens with a one-hot mask and torch.where per expert
and indexes the stacked weights per expert; ours sorts the N*k assignments once and unbinds the weights once."""
from __future__ import annotations


import torch

from bench.bench_vs_hf import _forward, _train_step, ratio_row
from engine.model import build_model
from engine.presets import get_preset

GOAL = 0.8
WORKLOADS = ((1, 64, 11), (4, 128, 5))   # (batch, seq, rounds)
# Qwen3-30B-A3B's architecture (128 narrow experts of which 8 per token, QK-norm, GQA) at CPU size
CFG = get_preset("qwen3-30b-a3b").config.replace(
    name="qwen3-moe-small", vocab_size=8000, context_length=512, d_model=256, n_layers=2, n_heads=4, n_kv_heads=2,
    head_dim=64, d_ff=512, n_experts=32, experts_per_token=4, expert_d_ff=128)


def main() -> None:
    import transformers

    from engine.interop import to_transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    ours = build_model(CFG, seed=0)
    hf = to_transformers(ours, attn_implementation="sdpa")
    print(f"{CFG.name}: {CFG.n_experts} experts, top-{CFG.experts_per_token}, d_model {CFG.d_model}, "
          f"{CFG.n_layers} layers; torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.get_num_threads()} threads")
    print("| workload | what | ours (median) | transformers (median) | ratio | goal <= 0.8x |")
    print("|---|---|---:|---:|---:|---|")
    for batch, seq, rounds in WORKLOADS:
        idx = torch.randint(0, CFG.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(1))
        ours.eval(), hf.eval()
        with torch.no_grad():
            gap = (ours(idx) - hf(input_ids=idx).logits).abs().max().item()
        for what, fn, mode in (("forward", _forward, "eval"), ("train step", _train_step, "train")):
            ours.train(mode == "train"), hf.train(mode == "train")
            ratio_row(f"B={batch}, T={seq}", what, lambda: fn(ours, idx, False), lambda: fn(hf, idx, True), rounds,
                      GOAL)
        print(f"(max |logits gap| {gap:.1e})")


if __name__ == "__main__":
    main()
