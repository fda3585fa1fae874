"""The Training page's decisions, without Streamlit: turn its controls into a run the engine can start (or a message
saying what is wrong), and the stored runs into table rows and picker labels. Tested directly."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping, NamedTuple

import torch

from app.latency_view import NOISY_NOTE
from app.text import md
from engine.config import ConfigError, ModelConfig
from engine.guard import MemoryRefusal, check_fits
from engine.limits import MAX_DATA_BYTES
from engine.measure.rounds import NOISY_SPREAD
from engine.train.data import Dataset, load_data, load_text
from engine.train.jobs import ab_configs
from engine.train.loop import RunResult, TrainConfig, model_for
from engine.train.small import small_version

DATA = {"names": "first names (character level)", "stdlib": "Python standard library source (byte level)",
        "upload": "a text file you upload (character level)"}
SIZES = ("small", "as configured")
SINGLE = "single run"
# TrainConfig's fields and their types (from the defaults): widget values arrive as int or float.
SETTING_TYPES = {f.name: type(getattr(TrainConfig(), f.name)) for f in fields(TrainConfig) if f.name != "data"}


class RunSetting(NamedTuple):
    """One number box of the run settings: its widget key, label, bounds and number_input extras."""
    key: str
    label: str
    lo: float
    hi: float
    extra: dict[str, Any] = {}


RUN_SETTINGS = {   # TrainConfig field -> its number box, in the page's order (two rows of six)
    "steps": RunSetting("t_steps", "Steps", 1, 100_000),
    "batch": RunSetting("t_batch", "Batch (sequences)", 1, 4096),
    "seq": RunSetting("t_seq", "Sequence (tokens)", 2, 4096),
    "lr": RunSetting("t_lr", "Peak lr", 1e-6, 1e4, {"format": "%.2e", "help": "Linear warmup to this, then cosine "
                                                      "decay to lr x final ratio."}),
    "warmup": RunSetting("t_warmup", "Warmup steps", 0, 100_000),
    "min_lr_ratio": RunSetting("t_ratio", "Final lr ratio", 0.0, 1.0),
    "weight_decay": RunSetting("t_wd", "Weight decay", 0.0, 10.0,
                               {"help": "AdamW decoupled decay on matrices; none on gains and biases."}),
    "grad_clip": RunSetting("t_clip", "Grad clip (0 = off)", 0.0, 100.0),
    "z_loss": RunSetting("t_zloss", "z-loss coefficient", 0.0, 1.0,
                         {"format": "%.1e", "help": "Adds coef x mean(log Z)^2 to the loss; keeps log Z near 0."}),
    "dropout": RunSetting("t_dropout", "Dropout", 0.0, 0.9),
    "seed": RunSetting("t_seed", "Seed", 0, 2**31 - 1),
    "eval_every": RunSetting("t_every", "Val loss every k steps", 1, 100_000),
}
# The page's URL keys (app.state.VIEW_PARAMS): `train_` + the setting, distinct from Budgets' `batch` and `seq`,
# which mean another page's batch and would carry over when a link's view keys are kept across a page switch.
URL_PARAMS = {"t_data": "train_data", "t_size": "train_size", "t_ab": "train_ab",   # widget key -> URL key
              **{s.key: f"train_{name}" for name, s in RUN_SETTINGS.items()}}
URL_KEYS = tuple(URL_PARAMS.values())


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


def is_noisy(spread: float | None) -> bool:
    """A run's per-step tokens/s spread (IQR / median) too wide to compare runs by, as Latency flags a timing."""
    return (spread or 0.0) > NOISY_SPREAD


def stored_runs_rows(runs: list[dict[str, Any]]) -> list[dict[str, str | int]]:
    """One row per stored run (engine.train.store.RunStore.list_runs): counts with separators, the val loss
    before → after training ('—' where a run has none, e.g. diverged before its last evaluation)."""
    return [{"id": r["id"], "name": r["name"], "data": r["data"], "status": r["status"], "steps": r["steps"],
             "params": f"{r['params']:,}", "processes": r["world"],
             "val loss (nats)": " → ".join(f"{v:.3f}" if v is not None else "—"
                                           for v in (r["initial_loss"], r["final_loss"])),
             "tokens/s (median step)": f"{r['tokens_per_s'] or 0:,.0f}"
                                        + (" (noisy)" if is_noisy(r.get("tokens_per_s_spread")) else "")}
            for r in runs]


def run_labels(runs: list[dict[str, Any]]) -> dict[int, str]:
    """run id -> the picker's label: id, name and data. Not the status: it changes while the run is picked, and
    Streamlit sends a picked option's old label back as its value."""
    return {r["id"]: f"{r['id']}: {r['name']} on {r['data']}" for r in runs}


def speed_text(results: Mapping[str, RunResult]) -> str:
    """How the runs' tokens/s were obtained, the A/B ratio, and which runs were too noisy for it to be read."""
    text = ("Tokens/s: the median over the training steps of batch x sequence tokens per second of the step "
            "(evaluation and sampling not timed); a median, so a few steps slowed by another process do not decide "
            "the comparison. ")
    rates = [r.tokens_per_s for r in results.values()]
    if len(rates) == 2 and min(rates) > 0:
        (a, ra), (b, rb) = results.items()
        text += f"{md(b)} / {md(a)} = {rb.tokens_per_s / ra.tokens_per_s:.2f}x. "
    noisy = [f"{md(k)} (IQR {r.tokens_per_s_spread:.0%} of the median)" for k, r in results.items()
             if is_noisy(r.tokens_per_s_spread)]
    if noisy:
        text += f"Noisy: {', '.join(noisy)}; {NOISY_NOTE.removeprefix('noisy: ')}."
    return text


def samples_caption(who: str, samples: list[str]) -> str:
    """Generated samples on one line, newlines shown as ⏎."""
    return f"Samples from {md(who)}: " + " · ".join(md(s.replace("\n", "⏎")) for s in samples)
