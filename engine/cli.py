"""`python -m engine COMMAND`: the same contract the app uses, for scripts and terminals.

Each module in engine/commands/ adds its subcommands through `register(subparsers)` (the helpers they share
live in engine/commands/__init__.py, so commands never import this module); bad input exits with status 2
and the validation messages on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import pkgutil
import re
import sys

from engine import commands
from engine.commands import UsageError
from engine.config import ConfigError
from engine.limits import InputError


def did_you_mean(word: str, known: list[str]) -> str:
    """' (did you mean X?)' for the closest known word (underscores read as hyphens), or ''."""
    near = difflib.get_close_matches(word.replace("_", "-"), known, n=1, cutoff=0.6)
    return f" (did you mean {near[0]}?)" if near else ""


class _Parser(argparse.ArgumentParser):
    """argparse with a suggestion for a mistyped command or choice (`param` -> params)."""

    def error(self, message: str):
        if m := re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message):
            message += did_you_mean(m[1], re.findall(r"'([^']*)'", m[2]))
        super().error(message)


def _unknown_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> str:
    """The usage error for arguments no parser took, each flag with its nearest real flag (`--n_kv_heads`)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[args.command]
    known = [o for a in sub._actions for o in a.option_strings if o.startswith("--")]
    words = [f"{e}{did_you_mean(e.partition('=')[0], known)}" if e.startswith("-") else e for e in extras]
    return f"{sub.prog}: error: unrecognized arguments: {' '.join(words)}"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m engine", description="Transformer Architecture Explorer engine")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"engine.commands.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        print(_unknown_flags(parser, args, extras), file=sys.stderr)
        return 2
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
