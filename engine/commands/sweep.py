"""sweep: one or two config knobs across their values, every closed-form metric per point, measured on demand."""
from __future__ import annotations

import argparse
import csv
import io
import signal
import sys
import threading

from engine.budget.memory import OPTIMIZERS, POLICIES
from engine.commands import UsageError, add_config_args, apply_field_flags, base_config, print_json, split_list
from engine.config import ConfigError
from engine.runtime import DTYPE_BYTES
from engine.sweep import HOLD_FIELDS, HOLD_TARGETS, METRICS, SweepSettings, parse_values, run_sweep, value_label
from engine.units import fmt_bytes, fmt_count, fmt_flops


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="one or two knobs across their values: params, memory, KV cache, FLOPs",
                       description="Every point is the base config with the knob values applied. Without --values "
                                   "a knob takes every declared choice, or a grid that fits it (divisors of n_heads "
                                   "for n_kv_heads, powers of two for attn_window, 1/4..4x otherwise). Invalid "
                                   "points are listed with their reason.")
    add_config_args(p)
    p.add_argument("--knob", action="append", required=True, metavar="FIELD",
                   help="the config field to sweep (or attention_layers: how many of the mixer layers are softmax "
                        "attention, the others the config's recurrent kind or Gated DeltaNet); give --knob twice for a grid of two")
    p.add_argument("--values", action="append", nargs="+", metavar="V",
                   help="the knob's values, `1,2,4` or `1 2 4` (the n-th --values belongs to the n-th --knob)")
    p.add_argument("--hold", choices=HOLD_FIELDS, help="solve this field at each point to keep parameters fixed")
    p.add_argument("--hold-target", choices=HOLD_TARGETS, default="total",
                   help="the count --hold keeps at the base's (default total)")
    p.add_argument("--context", type=int, help="tokens for KV cache, FLOPs and training memory "
                                               "(default: each point's context_length)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16")
    p.add_argument("--policy", choices=POLICIES, default="mixed-bf16")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    p.add_argument("--small", action="store_true",
                   help="sweep the preset's architecture at the small training size (d_model 64, 2 layers)")
    p.add_argument("--measure", nargs="+", metavar="latency,loss",
                   help="also measure: forward latency and/or the val loss of a short training run per point "
                        "(stored runs); `latency,loss` or `latency loss`")
    p.add_argument("--steps", type=int, default=100, help="training steps per point for --measure loss")
    p.add_argument("--latency-seq", type=int, default=64, help="tokens of the timed forward (--measure latency)")
    p.add_argument("--time-budget", type=float, default=5.0, help="seconds of interleaved latency rounds")
    p.add_argument("--device", default="auto")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true")
    out.add_argument("--csv", action="store_true")
    p.set_defaults(run=_sweep)


def _usage(e: ConfigError) -> UsageError:
    """Engine messages start with the setting's name; on the command line that name is the flag."""
    return UsageError("; ".join(f"--{p}" for p in e.problems))


def build(args: argparse.Namespace):
    """(sweep, base) from the flags; bad flags raise UsageError naming the flag."""
    from engine.train.small import small_version
    base = base_config(args)
    base = apply_field_flags(args, small_version(base) if args.small else base)
    if len(args.knob) > 2:
        raise UsageError(f"--knob: give at most two knobs, got {len(args.knob)}")
    given = args.values or []
    if len(given) > len(args.knob):
        raise UsageError(f"--values: {len(given)} lists for {len(args.knob)} --knob")
    knobs = {}
    for i, knob in enumerate(args.knob):
        try:
            knobs[knob] = parse_values(knob, split_list(given[i])) if i < len(given) else None
        except ConfigError as e:
            raise _usage(e) from None
        except ValueError as e:
            raise UsageError(f"--values: {e}") from None
    try:
        settings = SweepSettings(args.context, args.batch, args.dtype, args.policy, args.optimizer)
    except ConfigError as e:
        raise _usage(e) from None
    try:
        return run_sweep(base, knobs, settings, args.hold, args.hold_target)
    except ConfigError as e:
        raise _usage(e) from None


def _sweep(args: argparse.Namespace) -> int:
    sweep = build(args)
    rows = sweep.rows()
    if args.measure:
        rows = _measure(args, sweep)
    if args.json:
        print_json({"base": sweep.base.name, "knobs": list(sweep.knobs), "hold": sweep.hold,
                    "hold_target": sweep.hold_target if sweep.hold else None, "target": sweep.target,
                    "settings": vars(sweep.settings), "rows": rows})
    elif args.csv:
        print(_csv(rows), end="")
    else:
        _print_table(sweep, rows)
    bad = [r for r in rows if not r["valid"]]
    if bad:
        print(f"note: {len(bad)} of {len(rows)} points are invalid (listed with their reason)", file=sys.stderr)
    return 0


def _csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({**r, "problems": "; ".join(r["problems"])})
    return out.getvalue()


_FMT = {"parameters": fmt_count, "bytes": fmt_bytes, "FLOP": fmt_flops, "ms": lambda v: f"{v:,.3f} ms",
        "nats": lambda v: f"{v:.4f}"}


_SHORT = {"total_params": "params", "non_embedding_params": "non-emb", "active_params": "active",
          "weights_bytes": "weights", "kv_cache_bytes": "KV cache", "flops_per_token": "FLOPs/token",
          "train_memory_bytes": "train mem", "latency_ms": "latency", "latency_iqr_ms": "IQR",
          "val_loss": "val loss", "state_bytes": "state"}


def _print_table(sweep, rows: list[dict]) -> None:
    """One line per point, one column per metric; invalid points name their reason in place of numbers."""
    from engine.sweep.measured import MEASURED
    s = sweep.settings
    where = f"context {s.context:,}" if s.context else "each point's context_length"
    held = f"; {sweep.hold} solved to hold {sweep.hold_target} params at {sweep.target:,}" if sweep.hold else ""
    print(f"{sweep.base.name}: {' x '.join(sweep.knobs)}; batch {s.batch}, {where}, {s.dtype}, {s.policy} "
          f"{s.optimizer}{held}")
    units = {**{k: m.unit for k, m in METRICS.items()}, **{k: m.unit for k, m in MEASURED.items()}}
    keys = [k for k in units if k in rows[0]]
    points = []
    for r in rows:
        point = ", ".join(f"{k}={value_label(k, r[k])}" for k in sweep.knobs)
        points.append(point + (f" ({sweep.hold}={r[sweep.hold]:,})" if sweep.hold and r[sweep.hold] else ""))
    width = max(len(p) for p in points)
    cells = [[_FMT[units[k]](r[k]) if r[k] is not None else "-" for k in keys] for r in rows]
    widths = [max(len(_SHORT[k]), *(len(c[j]) for c in cells)) for j, k in enumerate(keys)]
    print(f"  {'point':<{width}}  " + "  ".join(f"{_SHORT[k]:>{w}}" for k, w in zip(keys, widths)))
    for point, r, c in zip(points, rows, cells):
        if not r["valid"]:
            print(f"  {point:<{width}}  invalid: " + "; ".join(r["problems"]))
            continue
        print(f"  {point:<{width}}  " + "  ".join(f"{v:>{w}}" for v, w in zip(c, widths)))
        for problem in r["problems"]:
            print(f"  {'':<{width}}  note: {problem}")


def _measure(args: argparse.Namespace, sweep) -> list[dict]:
    from engine.sweep.measured import MeasureSettings, estimate_duration, measure_sweep
    from engine.train.store import RunStore
    what = tuple(split_list(args.measure))
    try:
        ms = MeasureSettings(what=what, seq=args.latency_seq, budget_s=args.time_budget, steps=args.steps,
                             device=args.device)
    except ConfigError as e:   # the settings' names -> their flags
        flags = {"seq:": "latency-seq:", "budget_s:": "time-budget:"}
        raise _usage(ConfigError([next((f + p[len(k):] for k, f in flags.items() if p.startswith(k)), p)
                                  for p in e.problems])) from None

    est = estimate_duration(sweep, ms)
    print(f"measuring {', '.join(ms.what)}: {est.text} ({est.how}); Ctrl-C stops after the current round or step",
          file=sys.stderr, flush=True)
    shown = [0.0]

    def show(p) -> None:   # at most one line a second
        if p.elapsed_s - shown[0] >= 1:
            shown[0] = p.elapsed_s
            print(f"[{p.fraction:4.0%}] {p.what}; about {p.seconds_left:,.0f} s left", file=sys.stderr, flush=True)

    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        result = measure_sweep(sweep, ms, store=RunStore(), on_progress=show, stop=stop)
    finally:
        signal.signal(signal.SIGINT, previous)
    if result.stopped:
        print("stopped: the points measured so far are shown", file=sys.stderr)
    return result.rows()
