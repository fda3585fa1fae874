"""The CLI's subcommands, one module each with `register(subparsers)`; below, the pieces they share: config
flags derived from the field declarations, the --preset/--config base, JSON output and UsageError."""
from __future__ import annotations

import argparse
import json
import re
from typing import Any

from engine.config import FIELDS, ModelConfig
from engine.limits import MAX_CONFIG_BYTES, read_text


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
                       nargs="+" if spec.type is tuple else None, help=f"{spec.help} Allowed: {spec.allowed()}.")


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
    overrides = {n: ",".join(split_list(v)) if isinstance(v, list) else v for n, v in overrides.items()}
    return ModelConfig.from_dict(overrides, base=base) if overrides else base


def split_list(values: str | list[str]) -> list[str]:
    """A list option as typed: `q,v`, `q v` (nargs) or both mixed -> ['q', 'v']."""
    words = [values] if isinstance(values, str) else values
    return [w for word in words for w in re.split(r"[,\s]+", word) if w]


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2))
