"""plan: will a config fit on N GPUs of a kind (per-GPU memory by component), what will training cost, and what
will an inference engine make of it (longest context, concurrent requests, tokens/s)."""
from __future__ import annotations

import argparse

from engine.budget.memory import OPTIMIZERS, POLICIES, RECOMPUTE
from engine.commands import UsageError, add_config_args, load_config, print_json, split_list
from engine.plan import COMPONENTS, GPUS, MODES, Layout, Plan, Serving, Setup, plan
from engine.plan.finetune import DEFAULT_TARGETS, METHODS
from engine.plan.quant import KV_QUANTS, PLAIN_QUANTS
from engine.plan.serve import ENGINES
from engine.units import fmt_bytes


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="per-GPU memory under quantization, fine-tuning and parallelism; training cost; "
                                    "longest context, concurrent requests and tokens/s when serving")
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
    p.add_argument("--quant", default="none", metavar="SCHEME",
                   help=f"weight storage: {', '.join(PLAIN_QUANTS)}, or a llama.cpp file type gguf:Q4_K_M, "
                        f"gguf:Q8_0, gguf:IQ4_XS, ... (+imatrix / -imatrix)")
    p.add_argument("--quantize-also", nargs="*", default=[], metavar="PART",
                   help="quantize these too: embeddings, head (`embeddings,head` or `embeddings head`)")
    p.add_argument("--kv-quant", choices=KV_QUANTS, default="none",
                   help="KV cache storage (f16, q8_0, q4_0, ... are llama.cpp's --cache-type-k/-v)")
    p.add_argument("--finetune", choices=METHODS, default="full")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-targets", nargs="+", default=list(DEFAULT_TARGETS), metavar="T",
                   help="matrices that get adapters: q k v o gate up down (`q,v` or `q v`)")
    p.add_argument("--tokens", type=int, default=None,
                   help="training tokens (default: Chinchilla's 20 per parameter for full training; a fine-tune "
                        "needs its own budget)")
    p.add_argument("--mfu", type=float, default=0.4, help="assumed model FLOPs utilization (training)")
    p.add_argument("--price", type=float, default=2.0, help="assumed price per GPU-hour")
    p.add_argument("--currency", default="USD", help="the price's currency (a label)")
    g = p.add_argument_group("serving (--mode infer)")
    g.add_argument("--engine", choices=ENGINES, default=None,
                   help="how the KV pool is sized (default: llama.cpp for gguf: weights, else vllm)")
    g.add_argument("--utilization", type=float, default=None,
                   help="share of GPU memory the engine takes (vLLM gpu_memory_utilization, default 0.9)")
    g.add_argument("--activation-gib", type=float, default=None,
                   help="vLLM's profiled activation peak / llama.cpp's compute buffer, GiB (default: modelled)")
    g.add_argument("--non-torch-gib", type=float, default=1.0, help="vLLM's non-torch memory, GiB (default 1)")
    g.add_argument("--block-size", type=int, default=16, help="vLLM tokens per KV block")
    g.add_argument("--request-tokens", type=int, default=None,
                   help="N of 'concurrent requests of N tokens' (default: context_length)")
    g.add_argument("--efficiency", type=float, default=0.75, help="share of memory bandwidth reached (decode)")
    g.add_argument("--compute-efficiency", type=float, default=0.5, help="share of peak FLOP/s reached (prefill)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_plan)


def _gib(x: float | None) -> int | None:
    return None if x is None else round(x * 2**30)


def _plan(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    setup = Setup(mode=args.mode, policy=args.policy, optimizer=args.optimizer, recompute=args.recompute,
                  micro_batch=args.micro_batch, micro_batches=args.micro_batches,
                  seq=cfg.context_length if args.seq is None else args.seq, finetune=args.finetune,
                  lora_rank=args.lora_rank, lora_targets=tuple(split_list(args.lora_targets)),
                  quant=args.quant, quantize_also=tuple(split_list(args.quantize_also)), kv_quant=args.kv_quant)
    layout = Layout(args.gpus, args.tp, args.pp, args.zero, args.sequence_parallel, args.ep)
    serving = Serving(engine=args.engine, utilization=args.utilization, activation_bytes=_gib(args.activation_gib),
                      non_torch_bytes=_gib(args.non_torch_gib), block_size=args.block_size)
    try:
        p = plan(cfg, args.gpu, layout, setup, args.tokens, args.mfu, args.price, args.currency, serving,
                 args.request_tokens, args.efficiency, args.compute_efficiency)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.json:
        print_json(p.as_dict())
        return 0
    lay = p.as_dict()["layout"]
    print(f"{cfg.name} on {args.gpus} x {args.gpu}: dp {lay['dp']}, tp {lay['tp']}, pp {lay['pp']}, "
          f"ZeRO-{lay['zero']}; "
          f"{setup.mode}, {p.setup.finetune}, weights {p.setup.quant}, KV {setup.kv_quant}")
    for k in COMPONENTS + ("total",):
        print(f"  {k:<12} {fmt_bytes(p.per_gpu[k]):>12}")
    verdict = "fits" if p.fits else "does NOT fit"
    print(f"  {verdict} in {fmt_bytes(p.memory_bytes)} (margin {fmt_bytes(p.margin_bytes)})")
    print("  weights stored as " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in p.weights_by_storage.items()))
    if p.high_precision:
        print(f"  kept in high precision: {', '.join(p.high_precision)}")
    _print_cost(p, args)
    for n in p.notes:
        print(f"  note: {n}")
    return 0


def _print_cost(p: Plan, args: argparse.Namespace) -> None:
    c, cap, sp = p.cost, p.capacity, p.speed
    if c is not None and c.train_tokens is not None:
        how = "Chinchilla's 20 per parameter" if c.token_budget == "chinchilla" else "given"
        print(f"  training {c.train_tokens:,} tokens ({how}): {c.train_seconds / 86400:,.1f} days, cost "
              f"{c.train_cost:,.0f} {c.currency} (MFU {args.mfu:g}, {args.price:g} {c.currency} per GPU-hour)")
    if cap is None or sp is None:
        return
    unit = "blocks" if cap.engine == "vllm" else "cells"
    a = cap.assumptions
    print(f"  serving with {cap.engine} ({a['utilization']:.0%} of memory): KV pool {cap.blocks:,} {unit} = "
          f"{cap.kv_tokens:,} tokens ({fmt_bytes(cap.available_bytes)} available)")
    limit = "memory" if cap.context_limit == "memory" else "the model's context_length"
    print(f"  longest context {cap.max_context:,} tokens (limited by {limit}); concurrent requests of "
          f"{cap.request_tokens:,} tokens: {cap.max_concurrency:.2f}x")
    moe = f", {sp.experts_read:.1f} experts per MoE layer read" if sp.experts_read is not None else ""
    print(f"  decode at batch {sp.batch:,}, {sp.context:,} tokens: {sp.per_user:,.1f} tokens/s per user, "
          f"{sp.total:,.1f} in all ({sp.bound}-bound{moe}); prefill {sp.prefill_seconds * 1e3:,.1f} ms; "
          f"{p.cost_per_million:,.2f} {p.currency} per million tokens")
