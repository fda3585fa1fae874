"""plan: will a config fit on N GPUs of a kind (per-GPU memory by component), and what will it cost."""
from __future__ import annotations

import argparse

from engine.budget.memory import OPTIMIZERS, POLICIES, RECOMPUTE
from engine.commands import UsageError, add_config_args, load_config, print_json
from engine.plan import COMPONENTS, GPUS, MODES, Layout, Setup, plan
from engine.plan.finetune import DEFAULT_TARGETS, METHODS
from engine.plan.quant import KV_QUANTS, WEIGHT_QUANTS
from engine.units import fmt_bytes


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="per-GPU memory under quantization, fine-tuning and parallelism; time, cost")
    add_config_args(p)
    p.add_argument("--gpu", choices=tuple(GPUS), default="h100-80gb")
    p.add_argument("--gpus", type=int, default=1, help="GPUs in all (dp * tp * pp)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (divides heads, kv heads and d_ff)")
    p.add_argument("--pp", type=int, default=1, help="pipeline stages (at most n_layers)")
    p.add_argument("--zero", type=int, default=0, help="ZeRO stage over the data-parallel ranks: 0-3 (3 = FSDP)")
    p.add_argument("--ep", type=int, default=1, help="expert parallelism (MoE): experts split over ep dp ranks")
    p.add_argument("--sequence-parallel", action="store_true", help="split the norm activations across tp too")
    p.add_argument("--mode", choices=MODES, default="train")
    p.add_argument("--policy", choices=POLICIES, default="mixed-bf16")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    p.add_argument("--recompute", choices=RECOMPUTE, default="none")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch (inference: batch)")
    p.add_argument("--micro-batches", type=int, default=1, help="micro-batches per step (1F1B in flight)")
    p.add_argument("--seq", type=int, default=None, help="tokens per sequence / in the KV cache "
                                                          "(default: context_length)")
    p.add_argument("--quant", choices=WEIGHT_QUANTS, default="none", help="block matrices' weight storage")
    p.add_argument("--quantize-also", nargs="*", default=[], choices=("embeddings", "head"))
    p.add_argument("--kv-quant", choices=KV_QUANTS, default="none")
    p.add_argument("--finetune", choices=METHODS, default="full")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-targets", nargs="+", default=list(DEFAULT_TARGETS))
    p.add_argument("--tokens", type=int, default=None, help="training tokens (default: Chinchilla, 20 per param)")
    p.add_argument("--mfu", type=float, default=0.4, help="assumed model FLOPs utilization")
    p.add_argument("--price", type=float, default=2.0, help="assumed price per GPU-hour")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_plan)


def _plan(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    setup = Setup(mode=args.mode, policy=args.policy, optimizer=args.optimizer, recompute=args.recompute,
                  micro_batch=args.micro_batch, micro_batches=args.micro_batches,
                  seq=cfg.context_length if args.seq is None else args.seq, finetune=args.finetune,
                  lora_rank=args.lora_rank, lora_targets=tuple(args.lora_targets), quant=args.quant,
                  quantize_also=tuple(args.quantize_also), kv_quant=args.kv_quant)
    layout = Layout(args.gpus, args.tp, args.pp, args.zero, args.sequence_parallel, args.ep)
    try:
        p = plan(cfg, args.gpu, layout, setup, args.tokens, args.mfu, args.price)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.json:
        print_json(p.as_dict())
        return 0
    lay, c = p.as_dict()["layout"], p.cost
    print(f"{cfg.name} on {args.gpus} x {args.gpu}: dp {lay['dp']}, tp {lay['tp']}, pp {lay['pp']}, ZeRO-{lay['zero']}; "
          f"{setup.mode}, {p.setup.finetune}, weights {p.setup.quant}, KV {setup.kv_quant}")
    for k in COMPONENTS + ("total",):
        print(f"  {k:<12} {fmt_bytes(p.per_gpu[k]):>12}")
    verdict = "fits" if p.fits else "does NOT fit"
    print(f"  {verdict} in {fmt_bytes(p.memory_bytes)} (margin {fmt_bytes(p.margin_bytes)})")
    if p.high_precision:
        print(f"  kept in high precision: {', '.join(p.high_precision)}")
    print(f"  training {c.train_tokens:,} tokens: {c.train_seconds / 86400:,.1f} days, cost {c.train_cost:,.0f} "
          f"(MFU {args.mfu:g}, {args.price:g} per GPU-hour); Chinchilla point {c.chinchilla_tokens:,} tokens")
    print(f"  prefill {c.prefill_seconds * 1e3:,.1f} ms, decode {c.decode_tokens_per_s:,.1f} tokens/s")
    for n in p.notes:
        print(f"  note: {n}")
    return 0
