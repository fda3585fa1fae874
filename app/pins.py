"""Compare's pinned configs as one URL value: `pins=gpt2,llama-3-8b` for plain presets; a renamed or edited pin
as its own small query string (label, nearest preset, the fields that differ from it), so any pin, an uploaded
YAML one included, comes back exactly."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from app.state import config_from_params, url_params
from engine.config import ModelConfig
from engine.presets import PRESETS

Pin = tuple[str, ModelConfig]
LABEL = "pin"   # the label's key inside an encoded pin (not a config field)


def _nearest(cfg: ModelConfig) -> str:
    """The preset the config differs from in the fewest fields (the shortest link)."""
    return min(PRESETS, key=lambda name: len(url_params(cfg, name)))


def encode_pin(label: str, cfg: ModelConfig) -> str:
    if label in PRESETS and cfg == PRESETS[label].config:
        return label
    return urlencode({LABEL: label, **url_params(cfg, _nearest(cfg))})


def encode_pins(pins: list[Pin]) -> str:
    """Comma-separated: urlencode escapes every comma inside an encoded pin."""
    return ",".join(encode_pin(label, cfg) for label, cfg in pins)


def decode_pins(text: str) -> tuple[list[Pin], list[str]]:
    """(pins, problems): a pin that does not make a valid config is reported and left out."""
    pins, problems = [], []
    for token in filter(None, (t.strip() for t in text.split(","))):
        if "=" not in token:
            if token in PRESETS:
                pins.append((token, PRESETS[token].config))
            else:
                problems.append(f"pins: {token!r} is not a preset ({', '.join(PRESETS)}) or an encoded pin")
            continue
        params = dict(parse_qsl(token, keep_blank_values=True))
        label = params.pop(LABEL, None) or params.get("preset", "pin")
        _, cfg, bad = config_from_params(params)
        if bad:
            problems += [f"pins: {label}: {p.removeprefix('URL: ')}" for p in bad]
        else:
            pins.append((label, cfg))
    return pins, problems
