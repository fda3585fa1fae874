"""bench, train, runs: measured latency, short training runs and the stored runs."""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from engine.commands import UsageError, add_config_args, apply_field_flags, base_config, load_config, print_json
from engine.config import ModelConfig

BENCH_SEQ = 128


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measured forward (or forward+backward) latency, tokens/s and MFU")
    add_config_args(p)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=None, help=f"tokens per sequence (default: {BENCH_SEQ}, or "
                                                              "context_length when shorter)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present, else CPU), cpu, cuda, cuda:N")
    p.add_argument("--dtype", default="fp32", help="fp32, bf16 or fp16")
    p.add_argument("--mode", default="forward", help="forward, or train (forward + backward)")
    p.add_argument("--time-budget", type=float, default=1.0,
                   help="seconds of timing rounds at most (fewer once the spread settles)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_bench)

    p = sub.add_parser("train", help="a short training run on offline data, stored in $EXPLORER_HOME/runs.sqlite",
                       description="Without --preset/--config the model is GPT-2's architecture at a small size "
                                   "(d_model 64, 2 layers, 4 heads). Under `torchrun --nproc_per_node=N -m engine "
                                   "train ...` the same run is data-parallel over N processes.")
    add_config_args(p)
    p.add_argument("--small", action="store_true", help="train the preset's architecture at the small size")
    p.add_argument("--data", default="names", help="names (character level), stdlib (byte level) or a text file")
    p.add_argument("--device", default="auto")
    p.add_argument("--json", action="store_true")
    from engine.train.jobs import AB_CHOICES
    p.add_argument("--ab", choices=tuple(AB_CHOICES), metavar="COMPARISON",
                   help="train the two configs of an A/B comparison one after the other, same data and seed, both "
                        f"stored: {'; '.join(AB_CHOICES)}")
    from engine.train.loop import TrainConfig
    for name, default in TrainConfig().__dict__.items():
        if name not in ("data", "dropout"):   # dropout is the config field's --dropout flag
            p.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    p.set_defaults(run=_train)

    p = sub.add_parser("runs", help="list, export or delete stored training runs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--csv", type=int, metavar="ID", help="print run ID's steps as CSV")
    p.add_argument("--delete", type=int, metavar="ID", help="delete run ID (refused while it is running)")
    p.add_argument("--move-aside", action="store_true",
                   help="rename an unusable run store to runs.sqlite.unusable-TIMESTAMP (never deleted)")
    p.set_defaults(run=_runs)


def _bench(args: argparse.Namespace) -> None:
    from engine.guard import MemoryRefusal
    from engine.measure.latency import measure_latency
    cfg = load_config(args)
    seq = min(BENCH_SEQ, cfg.context_length) if args.seq is None else args.seq
    try:
        r = measure_latency(cfg, args.batch, seq, args.dtype, args.device, args.mode, args.time_budget)
    except (ValueError, MemoryRefusal) as e:
        raise UsageError(str(e)) from None
    if args.json:
        return print_json(r.as_dict())
    if r.mfu is not None:
        mfu = f"MFU {r.mfu_text} of {r.profile}"
    elif r.peak_flops:
        mfu = (f"MFU not shown: the peak estimate is wrong ({r.profile} peak {r.peak_flops / 1e12:.4f} TFLOP/s is "
               "below what this run achieved; later runs use the higher figure)")
    else:
        mfu = "MFU: no peak known for this device"
    print(f"{r.name} {r.mode}, batch {r.batch} x seq {r.seq}, {r.dtype} on {r.device}:")
    noisy = ", noisy: IQR > 25% of the median" if r.noisy else ""
    print(f"  median {r.median_ms:.3f} ms (IQR {r.iqr_ms:.3f} ms{noisy}, {r.runs} runs), {r.tokens_per_s:,.0f} "
          f"tokens/s, {r.achieved_tflops:.4f} TFLOP/s, {mfu}")
    if r.peak_memory_bytes is not None:
        from engine.units import fmt_bytes
        print(f"  peak memory {fmt_bytes(r.peak_memory_bytes)}")


def train_model_config(args: argparse.Namespace) -> ModelConfig:
    """--preset/--config as given; with --small, or with neither, that architecture at the small size.
    Field flags apply last."""
    from engine.train.small import small_version
    if (args.preset or args.config) and not args.small:
        return load_config(args)
    return apply_field_flags(args, small_version(base_config(args)))


def _train(args: argparse.Namespace) -> int:
    from engine.guard import MemoryRefusal
    from engine.train import ddp
    from engine.train.data import load_data
    from engine.runtime import resolve_device
    from engine.train.loop import TrainConfig, train
    from engine.train.store import RunStore
    cfg = train_model_config(args)
    tc = TrainConfig(**{k: getattr(args, k) for k in TrainConfig().__dict__ if k not in ("data", "dropout")},
                     dropout=cfg.dropout, data=args.data)
    try:
        data = load_data(args.data, seed=tc.seed)
        device = resolve_device(args.device)
    except (ValueError, RuntimeError) as e:
        raise UsageError(str(e)) from None
    configs = {cfg.name: cfg}
    if args.ab:
        from engine.train.jobs import ab_configs
        try:
            configs = ab_configs(cfg, args.ab)
        except ValueError as e:   # a layout the comparison cannot build names its field
            raise UsageError(str(e)) from None
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())   # Ctrl-C ends the run as "stopped"
    results = {}
    try:
        with ddp.session(device.type) as info:
            store = _store() if info.main else None
            for label, c in configs.items():
                if stop.is_set():
                    break
                if args.ab and info.main and not args.json:
                    print(f"{label}: {c.name}")
                on_step = None if args.json or not info.main else _print_step(tc)
                results[label] = train(c, tc, data, device=str(device), on_step=on_step, stop=stop, store=store,
                                       info=info)
    except MemoryRefusal as e:
        raise UsageError(str(e)) from None
    finally:
        signal.signal(signal.SIGINT, previous)
    diverged = any(r.status == "diverged" for r in results.values())
    if not info.main:
        return 1 if diverged else 0
    outs = {label: {"id": r.run_id, "initial_loss": r.initial_loss, "final_loss": r.final_loss,
                    "tokens_per_s": r.tokens_per_s, "status": r.status, "message": r.message,
                    "steps": len(r.records), "params": r.params, "processes": info.world, "samples": r.samples}
            for label, r in results.items()}
    if args.json:
        print_json({"comparison": args.ab, "runs": outs} if args.ab else next(iter(outs.values())))
    for label, r in results.items():
        if not args.json:
            if r.samples:
                print("samples:", *r.samples, sep="\n  ")
            name = f"{label}: run {r.run_id}" if args.ab else f"run {r.run_id}"
            print(f"{name} ({r.status}): {r.message}" if r.status != "diverged" else f"{name} diverged")
        if r.status == "diverged":
            print(f"error: {r.message}", file=sys.stderr)
    return 1 if diverged else 0


def _store():
    from engine.train.store import RunStore, StoreError
    try:
        return RunStore()
    except StoreError as e:
        raise UsageError(str(e)) from None


def _print_step(tc):
    def show(rec) -> None:
        if rec.val_loss is not None or rec.step == 1:
            val = f"  val {rec.val_loss:.4f}" if rec.val_loss is not None else ""
            print(f"step {rec.step:>5}/{tc.steps}  train {rec.train_loss:.4f}{val}  lr {rec.lr:.2e}  "
                  f"grad {rec.grad_norm:.3f}  {rec.tokens_per_s:,.0f} tokens/s", flush=True)
    return show


def _runs(args: argparse.Namespace) -> None:
    from engine.train.store import RunningError, RunStore, StoreError, default_path, move_aside
    if args.move_aside:
        try:
            return print(f"moved {default_path()} to {move_aside()}; the next run starts a new store")
        except OSError as e:
            raise UsageError(str(e)) from None
    try:
        store = RunStore()
        if args.csv is not None:
            return print(store.export_csv(args.csv), end="")
        if args.delete is not None:
            if not store.delete_run(args.delete):
                raise KeyError(f"run {args.delete} does not exist")
            return print(f"deleted run {args.delete}")
        runs = store.list_runs()
    except KeyError as e:
        raise UsageError(f"{e.args[0]} (see `python -m engine runs`)") from None
    except (RunningError, StoreError) as e:
        raise UsageError(str(e)) from None
    if args.json:
        return print_json(runs)
    if not runs:
        return print(f"no runs stored in {store.path}")
    for r in runs:
        loss = (f"{r['initial_loss']:.3f} -> {r['final_loss']:.3f}" if r["final_loss"] is not None
                else "no final loss")
        print(f"{r['id']:>5}  {r['status']:<9} {r['name']:<20} {r['data']:<10} {r['params']:>12,} params  "
              f"{r['steps']:>6} steps  {loss}")
