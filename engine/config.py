"""ModelConfig: every architecture knob, declared once.

Each family declares its own fields next to its module and closed forms (`Knobs` dataclasses in engine/layers/:
attention, MLA, sparse-attention indexer, position, FFN, MoE, norm, block); the model-wide sizes and the output
head are declared here.
ModelConfig is assembled from them, in FAMILIES order (the order of the YAML keys and of the editor's groups), and
checks every field's declaration, then each family's rules tying its fields together. Validation, YAML, the CLI
and the UI editor are all derived from these declarations (FIELDS). The defaults describe GPT-2 small, so
`ModelConfig()` is a real, recognisable model.
"""
from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass
from typing import Any

import yaml

from engine.checkpoint import CheckpointKnobs
from engine.layers.attention import AttentionKnobs
from engine.layers.block import BlockKnobs
from engine.layers.ffn import DENSE_FFNS, GATED_FFNS, FFNKnobs
from engine.layers.gdn import GDNKnobs
from engine.layers.indexer import IndexerKnobs
from engine.layers.kda import KDAKnobs
from engine.layers.mamba1 import Mamba1Knobs
from engine.layers.mamba2 import Mamba2Knobs
from engine.layers.mixers import LayerKnobs
from engine.layers.mla import MLAKnobs
from engine.layers.moe import MoEKnobs
from engine.layers.norm import NormKnobs
from engine.layers.position import PositionKnobs
from engine.layers.ssm import SSMKnobs
from engine.limits import MAX_INT, MAX_LAYERS, InputError, RefusedYAML, yaml_load
from engine.validation import ConfigError, FieldSpec, Knobs, coerce_value, declare, field_problem, parse_bool

__all__ = ["ConfigError", "DENSE_FFNS", "FAMILIES", "FIELDS", "FieldSpec", "GATED_FFNS", "GROUPS", "ModelConfig",
           "coerce", "field_names", "parse_bool"]

GROUPS = ("sizes", "attention", "layers", "gdn", "ssm", "position", "ffn", "moe", "normalization", "block", "output",
          "checkpoint")


@dataclass(frozen=True)
class SizeKnobs(Knobs):
    """The model's name and sizes."""
    name: str = declare("gpt2", "sizes", "A label for this configuration.")
    vocab_size: int = declare(50257, "sizes", "How many different tokens the model can read and predict.", lo=1)
    context_length: int = declare(1024, "sizes", "The longest sequence of tokens the model is built for.", lo=1)
    d_model: int = declare(768, "sizes", "Width of the residual stream: numbers per token between blocks.", lo=1)
    n_layers: int = declare(12, "sizes", "Depth: how many transformer blocks are stacked.", lo=1)


@dataclass(frozen=True)
class OutputKnobs(Knobs):
    """The output head and what happens to its logits."""
    tie_embeddings: bool = declare(True, "output", "The output head reuses the token-embedding matrix.")
    embed_scale: bool = declare(False, "output", "Multiply token embeddings by sqrt(d_model) (Gemma).")
    embed_multiplier: float = declare(1.0, "output", "Multiply token embeddings by this factor (Granite, Falcon-H1 "
                                      "embedding_multiplier).", lo=0, lo_open=True)
    logit_softcap: float | None = declare(None, "output", "Squash output logits smoothly into (-c, c) with "
                                           "c*tanh(z/c).", lo=0, lo_open=True, null="no cap")
    # output-head features of phi and cohere (issue #13)
    head_bias: bool = declare(False, "output", "A learned bias per vocabulary entry on the output head (Phi-1/2); "
                               "not shared with a tied embedding.")
    logit_scale: float = declare(1.0, "output", "Multiply the output logits by this factor, before any soft cap "
                                  "(Cohere: 0.0625).", lo=0, lo_open=True)
    mtp_depth: int | None = declare(None, "output", "Multi-token prediction (DeepSeek-V3): this many extra "
                                     "modules, each predicting one token further with two norms, a 2*d_model -> "
                                     "d_model projection and one more block, sharing the embedding and output head. "
                                     "Used in training and for speculative decoding: counted apart from the total, "
                                     "not built.", lo=1, null="no multi-token-prediction modules")


FAMILIES: tuple[type[Knobs], ...] = (SizeKnobs, AttentionKnobs, MLAKnobs, IndexerKnobs, LayerKnobs, GDNKnobs, KDAKnobs,
                                     SSMKnobs, Mamba2Knobs, Mamba1Knobs, PositionKnobs, FFNKnobs, MoEKnobs, NormKnobs,
                                     BlockKnobs, OutputKnobs, CheckpointKnobs)


@dataclass(frozen=True)
class ModelConfig(*reversed(FAMILIES)):   # a dataclass takes its bases' fields in reverse MRO: FAMILIES order
    """Every field of every family (FIELDS), validated on construction: a ModelConfig is always a valid one."""

    def __post_init__(self) -> None:
        for spec in FIELDS.values():   # a list given for a list field is kept as a tuple (the config is frozen)
            if spec.item is not None and isinstance(value := getattr(self, spec.name), list):
                object.__setattr__(self, spec.name, tuple(value))
        problems = _problems(self)
        if problems:
            raise ConfigError(problems)

    # ---- conversions ----------------------------------------------------------------------------------------
    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (list fields as lists), ready for YAML, JSON and the URL."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any], base: "ModelConfig | None" = None) -> "ModelConfig":
        """Build from a mapping (missing keys keep `base`'s or the default); every problem reported at once."""
        if not isinstance(data, dict):
            raise ConfigError([f"config: expected a mapping of field: value, got {type(data).__name__}"])
        names = field_names()
        problems, bad = [], set()
        values = dict((base or cls()).to_dict())
        for key, raw in data.items():
            if key not in names:
                near = difflib.get_close_matches(str(key), names, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                problems.append(f"unknown key `{key}`{hint}")
                continue
            try:
                values[key] = coerce(key, raw)
            except ValueError as e:
                problems.append(str(e))
                values[key], bad = raw, bad | {key}  # still invalid: rules tying it to other fields are skipped
        try:
            cfg = cls(**values)
        except ConfigError as e:
            problems += [p for p in e.problems if p.partition(":")[0] not in bad]
        if problems:
            raise ConfigError(problems)
        return cfg

    def to_yaml(self) -> str:
        return yaml.dump(self.to_dict(), Dumper=_FlatDumper, sort_keys=False, width=1 << 20)

    @classmethod
    def from_yaml(cls, text: str) -> "ModelConfig":
        try:
            data = yaml_load(text)
        except InputError as e:
            raise ConfigError([str(e)]) from None
        except yaml.YAMLError as e:
            where = getattr(e, "problem_mark", None)
            at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
            if isinstance(e, RefusedYAML):
                raise ConfigError([f"yaml: {e.problem}{at}"]) from None
            if isinstance(e, yaml.constructor.ConstructorError):  # e.g. !!python/object: never constructed
                raise ConfigError([f"yaml: {e.problem}{at}; only plain values are allowed "
                                   f"(numbers, strings, true/false, null)"]) from None
            what = ", ".join(s for s in (getattr(e, "context", None), getattr(e, "problem", None)) if s) or e
            raise ConfigError([f"yaml: not valid YAML{at}: {what}"]) from None
        if data is None:
            raise ConfigError(["yaml: the document is empty; expected a mapping such as `d_model: 768`"])
        if not isinstance(data, dict):
            kind = "a list" if isinstance(data, list) else f"the single value {data!r}"
            raise ConfigError([f"yaml: expected a mapping of field: value such as `d_model: 768`, got {kind}"])
        return cls.from_dict(data)


class _FlatDumper(yaml.SafeDumper):
    """One line per field: list fields as flow lists ([1.0, 2.0]), never wrapped."""


_FlatDumper.add_representer(list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


# ---- declarations as data ----------------------------------------------------------------------------------
def _spec(f: dataclasses.Field) -> FieldSpec:
    hint = typing.get_type_hints(ModelConfig)[f.name]
    args = typing.get_args(hint)
    optional = isinstance(hint, types.UnionType) and type(None) in args
    base = next(a for a in args if a is not type(None)) if optional else hint
    item = typing.get_args(base)[0] if typing.get_origin(base) is tuple else None
    return FieldSpec(name=f.name, type=tuple if item else base, optional=optional, default=f.default, item=item,
                     **f.metadata)


FIELDS: dict[str, FieldSpec] = {f.name: _spec(f) for f in dataclasses.fields(ModelConfig)}


def field_names() -> list[str]:
    return list(FIELDS)


def coerce(name: str, raw: Any) -> Any:
    """Convert a raw value (YAML scalar, CLI or URL string) to the field's type, or raise ValueError."""
    return coerce_value(FIELDS[name], raw)


def _big(n: int) -> str:
    return f"{n:,}" if n < 10**30 else f"a {len(str(n)):,}-digit number"


def _bounds(c: ModelConfig, bad: set[str]) -> list[str]:
    """engine/limits.py's bounds, the same for app and CLI: integers a browser or JSON holds exactly, and a depth
    whose layer-by-layer budgets stay interactive. Fields that fail here are added to `bad`."""
    problems = []
    for spec in FIELDS.values():
        value = getattr(c, spec.name)
        if spec.name not in bad and spec.type is int and isinstance(value, int) and value > MAX_INT:
            problems.append(f"{spec.name}: {_big(value)} is more than {MAX_INT:,} "
                            f"(2^53 - 1, the largest integer a browser or JSON holds exactly)")
            bad.add(spec.name)
    if "n_layers" not in bad and c.n_layers > MAX_LAYERS:
        problems.append(f"n_layers: {c.n_layers:,} is more than this app computes interactively (at most "
                        f"{MAX_LAYERS:,}: the budgets are summed layer by layer)")
        bad.add("n_layers")
    return problems


def _problems(c: ModelConfig) -> list[str]:
    """Every problem with the config: single-field checks, the limits, then each family's rules tying fields
    together whose fields are individually valid."""
    problems, bad = [], set()
    for spec in FIELDS.values():
        if p := field_problem(spec, getattr(c, spec.name)):
            problems.append(p)
            bad.add(spec.name)
    if "name" not in bad and not c.name.strip():   # it labels pages, downloads, runs and pins
        problems.append("name: empty; give the config a label (any text)")
    problems += _bounds(c, bad)

    def ok(*names: str) -> bool:
        for name in names:   # a misspelt name would never be reported, so its rule would run on a refused value
            if name not in FIELDS:
                raise KeyError(f"a config rule reads `{name}`, which is not a declared field")
        return not bad.intersection(names)

    for family in FAMILIES:
        problems += family.rules(c, ok)
    return problems
