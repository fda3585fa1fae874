"""What a teacher's server allows for heavy jobs (training runs, latency sweeps, measured sweep columns, the
Measure buttons), declared once: each option's environment variable, `python -m app.serve` flag, default and
help come from OPTIONS. The app reads the environment (`policy()`); `app.serve` sets it from its flags.

Stdlib only: `make serve` parses these before Streamlit and torch are imported.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping


def default_jobs(cpus: int | None = None) -> int:
    """Heavy jobs at once: half the cores, at least one (the other half keeps pages and knob changes quick)."""
    return max(1, (cpus or os.cpu_count() or 1) // 2)


def _count(lo: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.replace(",", "").replace("_", ""))
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
        if value < lo:
            raise ValueError(f"{value:,} is below the minimum {lo:,}")
        return value
    return parse


def _switch(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "on", "yes"):
        return True
    if low in ("0", "false", "off", "no"):
        return False
    raise ValueError(f"{text!r} is not on or off (also 1/0, true/false, yes/no)")


@dataclass(frozen=True)
class Option:
    name: str                    # the Policy field
    env: str                     # environment variable
    parse: Callable[[str], object]
    default: object              # None: no limit
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


OPTIONS = (
    Option("jobs", "EXPLORER_JOBS", _count(1), None,
           "heavy jobs that run at once, server-wide (default: half the cores, at least one)"),
    Option("queue", "EXPLORER_QUEUE", _count(0), 200,
           "heavy jobs that may wait for a free slot; one more is refused with a message"),
    Option("heavy", "EXPLORER_HEAVY", _switch, True,
           "off: no training, latency sweeps, measured sweep columns or Measure buttons on this server"),
    Option("max_steps", "EXPLORER_MAX_STEPS", _count(1), None,
           "most optimizer steps one training run (or a measured sweep point's run) may take"),
    Option("max_params", "EXPLORER_MAX_PARAMS", _count(1), None,
           "most parameters a model built by a heavy job may have"),
)


@dataclass(frozen=True)
class Policy:
    jobs: int
    queue: int
    heavy: bool
    max_steps: int | None
    max_params: int | None


class PolicyError(ValueError):
    """A server option with a value it cannot take; the message names the variable and what is allowed."""


def policy(environ: Mapping[str, str] | None = None) -> Policy:
    """The server's policy from the environment (defaults where a variable is unset or empty)."""
    env = os.environ if environ is None else environ
    values, problems = {}, []
    for opt in OPTIONS:
        raw = env.get(opt.env, "").strip()
        try:
            values[opt.name] = opt.parse(raw) if raw else opt.default
        except ValueError as e:
            problems.append(f"{opt.env} ({opt.flag}): {e}; {opt.help}")
    if problems:
        raise PolicyError("; ".join(problems))
    if values["jobs"] is None:
        values["jobs"] = default_jobs()
    return Policy(**values)
