"""`python -m engine COMMAND`: the same contract the app uses, for scripts and terminals.

Each module in engine/commands/ adds its subcommands through `register(subparsers)`; bad input exits with
status 2 and the validation messages on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from pathlib import Path
from typing import Any

from engine import commands
from engine.config import FIELDS, ConfigError, ModelConfig
from engine.limits import MAX_CONFIG_BYTES, InputError, read_text


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
        base = ModelConfig.from_yaml(read_text(args.config, MAX_CONFIG_BYTES, "config"))
    else:
        base = ModelConfig()
    return base


def apply_field_flags(args: argparse.Namespace, base: ModelConfig) -> ModelConfig:
    """`base` with every --FIELD flag given on the command line (all problems reported at once)."""
    overrides = {n: getattr(args, "field_" + n) for n in FIELDS if getattr(args, "field_" + n, None) is not None}
    return ModelConfig.from_dict(overrides, base=base) if overrides else base


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2))


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
