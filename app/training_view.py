"""The Training page's decisions, without Streamlit: turn its controls into a run the engine can start (or a message
saying what is wrong), and the stored runs into table rows and picker labels. Tested directly."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping, NamedTuple

import torch

from app.text import md
from engine.config import ConfigError, ModelConfig
from engine.guard import MemoryRefusal, check_fits
from engine.limits import MAX_DATA_BYTES
from engine.train.data import Dataset, load_data, load_text
from engine.train.jobs import ab_configs
from engine.train.loop import TrainConfig, model_for
from engine.train.small import small_version

DATA = {"names": "first names (character level)", "stdlib": "Python standard library source (byte level)",
        "upload": "a text file you upload (character level)"}
SIZES = ("small", "as configured")
SINGLE = "single run"
# TrainConfig's fields and their types (from the defaults): widget values arrive as int or float.
SETTING_TYPES = {f.name: type(getattr(TrainConfig(), f.name)) for f in fields(TrainConfig) if f.name != "data"}


class PlannedRun(NamedTuple):
    """Everything engine.train.jobs.TrainJob needs besides the store and device."""
    configs: dict[str, ModelConfig]
    tc: TrainConfig
    data: Dataset


def plan_run(cfg: ModelConfig, settings: Mapping[str, float], source: str, size: str, ab: str,
             upload: tuple[str, bytes] | None, device: str | torch.device) -> PlannedRun | str:
    """The configs, TrainConfig and data for the page's choices, or a message naming what is wrong: a bad
    setting, a missing or undecodable upload, or a model that does not fit `device` (checked before any build).
    `settings`: TrainConfig field -> value; `upload`: (file name, bytes) when the source is 'upload'."""
    try:
        tc = TrainConfig(**{k: SETTING_TYPES[k](v) for k, v in settings.items()}, data=source)
        base = small_version(cfg) if size == "small" else cfg
        configs = {base.name: base} if ab == SINGLE else ab_configs(base, ab)
    except ConfigError as e:
        return "; ".join(e.problems)
    if source == "upload":
        if upload is None:
            return "Upload a text file to train on it."
        name, raw = upload
        if len(raw) > MAX_DATA_BYTES:
            return f"data: {name} is {len(raw):,} bytes; the limit is {MAX_DATA_BYTES:,} bytes"
        try:
            data = load_text(raw.decode("utf-8"), name=name)
        except UnicodeDecodeError as e:
            return f"data: {name} is not UTF-8 text (byte {e.start:,} cannot be decoded); upload a plain-text file"
        except ValueError as e:
            return f"data: {name} cannot be used ({e})"
    else:
        data = load_data(source, seed=tc.seed)
    try:
        tc.check_data(data)
        for c in configs.values():
            check_fits(model_for(c, data, tc), device, tc.batch, tc.seq, "fp32", training=True)
    except (ConfigError, MemoryRefusal) as e:
        return str(e)
    return PlannedRun(configs, tc, data)


def stored_runs_rows(runs: list[dict[str, Any]]) -> list[dict[str, str | int]]:
    """One row per stored run (engine.train.store.RunStore.list_runs): counts with separators, the val loss
    before → after training ('—' where a run has none, e.g. diverged before its last evaluation)."""
    return [{"id": r["id"], "name": r["name"], "data": r["data"], "status": r["status"], "steps": r["steps"],
             "params": f"{r['params']:,}", "processes": r["world"],
             "val loss (nats)": " → ".join(f"{v:.3f}" if v is not None else "—"
                                           for v in (r["initial_loss"], r["final_loss"])),
             "tokens/s": f"{r['tokens_per_s'] or 0:,.0f}"} for r in runs]


def run_labels(runs: list[dict[str, Any]]) -> dict[int, str]:
    """run id -> the picker's label: id, name, data and status."""
    return {r["id"]: f"{r['id']}: {r['name']} on {r['data']} ({r['status']})" for r in runs}


def samples_caption(who: str, samples: list[str]) -> str:
    """Generated samples on one line, newlines shown as ⏎."""
    return f"Samples from {md(who)}: " + " · ".join(md(s.replace("\n", "⏎")) for s in samples)
