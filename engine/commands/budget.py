"""memory, flops: closed-form budgets, and with --measure the same quantities measured beside them."""
from __future__ import annotations

import argparse
import sys

from engine.budget.devices import DEVICE_PROFILES, roofline
from engine.budget.flops import arithmetic_intensity, flops_budget, gap_note
from engine.budget.memory import DTYPE_BYTES, OPTIMIZERS, POLICIES, RECOMPUTE, attention_windows, memory_budget
from engine.commands import UsageError, add_config_args, load_config, print_json
from engine.guard import MemoryRefusal
from engine.layers.kinds import OURS
from engine.layers.position import seq_problem
from engine.measure import Measurement
from engine.units import fmt_bytes, fmt_flops
from engine.validation import size_problems

MEMORY_KEYS = ("weights_bytes", "grads_bytes", "optimizer_bytes", "master_bytes", "activations_bytes",
               "kv_cache_bytes", "state_bytes", "train_total_bytes", "infer_total_bytes")
FLOP_KEYS = ("forward_flops", "backward_flops", "flops_per_token", "attention_flops", "matmul_flops",
             "six_n_per_token", "palm_per_token")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="memory budget of training and inference (closed form, --measure)")
    _common(p)
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16", help="activations and KV cache")
    p.add_argument("--policy", choices=POLICIES, default="mixed-bf16", help="precision of the training state")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    p.add_argument("--recompute", choices=RECOMPUTE, default="none", help="activation recomputation (modelled)")
    p.set_defaults(run=_memory)
    p = sub.add_parser("flops", help="FLOPs per step and per token, roofline (closed form, --measure)")
    _common(p)
    p.add_argument("--full-square", action="store_true",
                   help="count attention over the full T x T square (FlopCounterMode's convention) instead of only "
                        "the query-key pairs a causal, windowed kernel computes")
    p.add_argument("--device-profile", choices=tuple(DEVICE_PROFILES), default="H100", help="for the roofline")
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16", help="for the roofline")
    p.set_defaults(run=_flops)


def _common(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--batch", type=int, default=1, help="sequences per step (default 1)")
    p.add_argument("--seq", type=int, default=None, help="tokens per sequence (default: context_length)")
    p.add_argument("--attention", choices=("sdpa", "explicit"), default="sdpa", help="attention path")
    p.add_argument("--json", action="store_true")
    p.add_argument("--measure", action="store_true", help="also measure and print estimate, measurement, %% error")


def _sizes(args: argparse.Namespace):
    cfg = load_config(args)
    seq = cfg.context_length if args.seq is None else args.seq
    if problems := size_problems(args.batch, seq) or [p for p in [seq_problem(cfg, seq)] if p]:
        raise UsageError("; ".join(problems))
    return cfg, args.batch, seq


def _memory(args: argparse.Namespace) -> int:
    cfg, B, T = _sizes(args)
    b = memory_budget(cfg, B, T, args.dtype, args.policy, args.optimizer, args.recompute, args.attention)
    measured, note, refusal = _measure_memory(cfg, B, T, args) if args.measure else ({}, None, None)
    if args.json:
        print_json({**{k: getattr(b, k) for k in MEMORY_KEYS}, "activations_per_layer": b.activations_per_layer,
                    "logits_bytes": b.logits_bytes, "embedding_bytes": b.embedding_bytes, "formulas": b.formulas,
                    **({"kv_cache_expanded_bytes": b.kv_cache_expanded_bytes} if cfg.mla else {}),
                    **({"kv_cache_index_bytes": b.kv_cache_index_bytes} if b.kv_cache_index_bytes is not None
                       else {}),
                    "kv_cache_layers": len(attention_windows(cfg)), "state_convention": OURS, "states": b.states,
                    **({"measurements": {k: m.as_dict() for k, m in measured.items()}, "peak_note": note}
                       if args.measure else {})})
    else:
        print(f"{cfg.name}: batch {B}, seq {T}, {args.dtype} activations, {args.policy} {args.optimizer}, "
              f"recompute {args.recompute}")
        for k in MEMORY_KEYS:
            print(f"  {k.removesuffix('_bytes'):<12} {fmt_bytes(getattr(b, k)):>12}  {b.formulas[k]}")
        if cfg.mla:
            print(f"  {'kv expanded':<12} {fmt_bytes(b.kv_cache_expanded_bytes):>12}  "
                  f"{b.formulas['kv_cache_expanded_bytes']}")
        if b.kv_cache_index_bytes is not None:
            print(f"  {'kv indexer':<12} {fmt_bytes(b.kv_cache_index_bytes):>12}  "
                  f"{b.formulas['kv_cache_index_bytes']} (part of kv_cache)")
        if b.state_bytes:
            _print_states(b.states)
        _print_measurements(measured, fmt_bytes)
        if note:
            print(f"  peak memory: {note}")
    if refusal:   # bad input for this machine, like every refusal: exit 2
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    return 0


def _print_states(states: dict[str, dict]) -> None:
    """The recurrent layers' state as each engine holds it (the total above is this engine's, vLLM's)."""
    print("  recurrent state per convention (conv window + recurrent state, whatever the context):")
    for name, s in states.items():
        print(f"    {name:<12} {fmt_bytes(s['total']):>12}  conv {fmt_bytes(s['conv'])} + recurrent "
              f"{fmt_bytes(s['recurrent'])}; {s['source']}")


def _measure_memory(cfg, B, T, args) -> tuple[dict[str, Measurement], str | None, str | None]:
    """Activations and KV cache on this machine's device, and the peak of a training step where that is CUDA.
    Returns (measurements, why the peak is missing, refusal message)."""
    from engine.measure.peak import peak_unavailable
    from engine.measure.suite import measure_config
    from engine.runtime import default_device
    device = default_device()
    why = peak_unavailable(device)
    try:
        measured = measure_config(cfg, B, T, args.dtype, args.attention, device,
                                  ("activations", "kv_cache") if why else ("activations", "kv_cache", "peak"))
    except MemoryRefusal as e:
        return {}, None, str(e)
    return measured, why and f"unavailable: {why}", None


def _print_measurements(measured: dict[str, Measurement], fmt) -> None:
    if not measured:
        return
    print("measured:")
    for k, m in measured.items():
        print(f"  {m.quantity:<22} estimate {fmt(m.estimate):>14}  measured {fmt(m.measured):>14}  "
              f"error {m.error_pct:+.2f}%  ({m.method})")


def _flops(args: argparse.Namespace) -> int:
    cfg, B, T = _sizes(args)
    f = flops_budget(cfg, B, T, causal=not args.full_square)
    roof = roofline(cfg, args.device_profile, B, T, args.dtype)
    measured = {}
    if args.measure:
        from engine.measure.suite import measure_config
        try:
            measured = measure_config(cfg, B, T, impl=args.attention, steps=("flops",))
        except MemoryRefusal as e:
            raise UsageError(str(e)) from None
    if args.json:
        print_json({**{k: getattr(f, k) for k in FLOP_KEYS}, "train_flops": f.train_flops, "causal": f.causal,
                    **({"indexer_flops": f.indexer_flops} if f.indexer_flops else {}),
                    "formulas": f.formulas,
                    "arithmetic_intensity": {k: v.flops_per_byte
                                             for k, v in arithmetic_intensity(cfg, B, T, args.dtype).items()},
                    "roofline": {k: {"bound": r.bound, "flops_per_byte": r.flops_per_byte, "ridge": r.ridge,
                                     "time_s": r.time_s} for k, r in roof.items()},
                    **({"measurements": {k: m.as_dict() for k, m in measured.items()}} if args.measure else {})})
        return 0
    print(f"{cfg.name}: batch {B}, seq {T}, attention "
          + ("over the full T x T square (--full-square)" if args.full_square else
             "over the causal/window query-key pairs (--full-square for FlopCounterMode's convention)"))
    for k in FLOP_KEYS + (("indexer_flops",) if f.indexer_flops else ()):
        print(f"  {k:<16} {fmt_flops(getattr(f, k)):>14}  {f.formulas[k]}")
    print(f"  {gap_note(cfg, T)}")
    for r in roof.values():
        print(f"  {r.verdict}; about {r.time_s * 1e3:,.3f} ms")
    if measured and not args.full_square:
        print("note: FlopCounterMode counts the full square; the measurement is compared with the full-square count")
    _print_measurements(measured, fmt_flops)
    return 0
