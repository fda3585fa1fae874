"""`python -m engine COMMAND`: the same contract the app uses, for scripts and terminals.

Each module in engine/commands/ adds its subcommands through `register(subparsers)`; bad input exits with
status 2 and the validation messages on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import json
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any

from engine import commands
from engine.config import FIELDS, ConfigError, ModelConfig


class UsageError(Exception):
    """Bad input that is not a config field (a missing file, an unknown preset): exit 2 with this message."""


def add_config_args(p: argparse.ArgumentParser) -> None:
    """--preset / --config choose the base config; one --FIELD flag per declared field overrides it."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", help="a named preset (see `python -m engine presets`)")
    src.add_argument("--config", metavar="FILE", help="a YAML config file")
    g = p.add_argument_group("config fields (override the preset or file)")
    for spec in FIELDS.values():
        g.add_argument("--" + spec.name.replace("_", "-"), dest="field_" + spec.name, metavar="V",
                       help=f"{spec.help} Allowed: {spec.allowed()}.")


def load_config(args: argparse.Namespace) -> ModelConfig:
    """The --preset or --config base (else the defaults) with the --FIELD flags applied."""
    return apply_field_flags(args, base_config(args))


def base_config(args: argparse.Namespace) -> ModelConfig:
    """The --preset or --config base alone, for commands that reshape it before the field flags apply."""
    from engine.presets import get_preset
    if getattr(args, "preset", None):
        try:
            base = get_preset(args.preset).config
        except KeyError as e:
            raise UsageError(e.args[0]) from None
    elif getattr(args, "config", None):
        try:
            text = Path(args.config).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"config: cannot read {args.config}: {e.strerror if isinstance(e, OSError) else e}")
        base = ModelConfig.from_yaml(text)
    else:
        base = ModelConfig()
    return base


def apply_field_flags(args: argparse.Namespace, base: ModelConfig) -> ModelConfig:
    """`base` with every --FIELD flag given on the command line (all problems reported at once)."""
    overrides = {n: getattr(args, "field_" + n) for n in FIELDS if getattr(args, "field_" + n, None) is not None}
    return ModelConfig.from_dict(overrides, base=base) if overrides else base


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2))


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
    words = [f"{e}{did_you_mean(e.split('=', 1)[0], known)}" if e.startswith("-") else e for e in extras]
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
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
