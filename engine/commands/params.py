"""presets, params, export: parameter counts and configs."""
from __future__ import annotations

import argparse

from engine.budget.params import count_params
from engine.commands import add_config_args, load_config, print_json
from engine.presets import PRESETS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("presets", help="list the named real-model presets")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_presets)
    p = sub.add_parser("params", help="exact parameter count per component")
    add_config_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_params)
    p = sub.add_parser("export", help="print the config as YAML")
    add_config_args(p)
    p.set_defaults(run=lambda a: print(load_config(a).to_yaml(), end=""))


def _presets(args: argparse.Namespace) -> None:
    rows = [{"name": n, "total_params": p.reference_params, "source": p.source, "notes": p.notes}
            for n, p in PRESETS.items()]
    if args.json:
        return print_json(rows)
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        print(f"{r['name']:<{width}}  {r['total_params']:>16,}  {r['notes']}")


def _params(args: argparse.Namespace) -> None:
    cfg = load_config(args)
    count = count_params(cfg)
    if args.json:
        return print_json(count.as_dict())
    print(f"{cfg.name}: {count.total:,} parameters ({count.non_embedding:,} non-embedding)")
    if count.active != count.total:
        print(f"active per token: {count.active:,} ({count.active_non_embedding:,} non-embedding); "
              f"memory holds all {count.total:,}, compute uses {count.active:,}")
    for name, n in count.components.items():
        print(f"  {name:<16} {n:>16,}  {100 * n / count.total:6.2f}%")
    if count.mtp:
        print(f"multi-token prediction ({cfg.mtp_depth} module{'s' * (cfg.mtp_depth > 1)}): {count.mtp:,} "
              f"more, not in the total")
    verb = "saves" if count.tied else "would save"
    print(f"tying the embedding and output head {verb} {count.tying_saves:,}")
