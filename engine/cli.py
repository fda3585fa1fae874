"""`python -m engine COMMAND`: the same contract the app uses, for scripts and terminals.

Each module in engine/commands/ adds its subcommands through `register(subparsers)` (the helpers they share
live in engine/commands/__init__.py, so commands never import this module); bad input exits with status 2
and the validation messages on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from engine import commands
from engine.commands import UsageError
from engine.config import ConfigError
from engine.limits import InputError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description="Transformer Architecture Explorer engine")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"engine.commands.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except ConfigError as e:
        for line in e.problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except (UsageError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
