"""Background training for the app, and the A/B pairs it compares.

A TrainJob trains one or more configs one after another (same data, same seed, same settings) in a daemon
thread, so the page stays responsive while it polls `records`, `progress` and `results`. One after another,
not at once: two runs sharing the CPU would each report half the tokens/s. With a ticket of the server's job
queue (engine.job_queue) it first waits for its turn; Stop while it waits leaves the queue (`cancelled`).
"""
from __future__ import annotations

import threading

from engine.config import ModelConfig
from engine.job_queue import QueuedJob, Ticket
from engine.layers.layer_map import own_recurrent, with_attention_layers
from engine.layers.mixers import MIXERS
from engine.measure.estimate import call_seconds
from engine.runtime import resolve_device
from engine.sweep.hold import equal_params_transformer
from engine.train.data import Dataset
from engine.train.loop import RunResult, StepRecord, TrainConfig, model_for, train
from engine.validation import choice_problem, require


def matched_gated_dff(d_ff: int) -> int:
    """A gated FFN has three d_model x d_ff matrices, a dense one two: 2/3 of the dense width matches params."""
    return max(1, round(2 * d_ff / 3))


def _ffn_pair(cfg: ModelConfig) -> dict[str, ModelConfig]:
    dense = cfg.replace(ffn="gelu", d_ff=4 * cfg.d_model)
    return {"dense GELU": dense, "SwiGLU (matched params)": cfg.replace(ffn="swiglu", d_ff=matched_gated_dff(dense.d_ff))}


def _hybrid_pair(cfg: ModelConfig) -> dict[str, ModelConfig]:
    """One attention layer in four (at least one) and the config's recurrent kind elsewhere (Gated DeltaNet when
    it has none), against the transformer with the same total parameters (every layer attention, the FFN width
    solved: engine/sweep/hold.py)."""
    n = sum(bool(s.mixers) for s in cfg.layer_specs)
    k = max(1, n // 4)
    hybrid = with_attention_layers(cfg, k)
    kind = MIXERS[own_recurrent(cfg)].label
    return {"transformer (equal params)": equal_params_transformer(hybrid),
            f"hybrid ({k} attention of {n}, {kind})": hybrid}


AB_CHOICES = {
    "LayerNorm vs RMSNorm": lambda c: {"LayerNorm": c.replace(norm="layernorm"),
                                       "RMSNorm": c.replace(norm="rmsnorm", norm_bias=False)},
    "dense vs SwiGLU": _ffn_pair,
    "pre-norm vs post-norm": lambda c: {"pre-norm": c.replace(norm_placement="pre"),
                                        "post-norm": c.replace(norm_placement="post")},
    "learned positions vs RoPE": lambda c: {"learned": c.replace(position="learned"),
                                            "RoPE": c.replace(position="rope", rope_fraction=1.0)},
    "transformer vs hybrid": _hybrid_pair,
}


def ab_configs(cfg: ModelConfig, choice: str) -> dict[str, ModelConfig]:
    """Two configs that differ only in the compared knob (and, for the FFN, the width that matches params)."""
    require(choice_problem("comparison", choice, AB_CHOICES))
    return {label: c.replace(name=f"{cfg.name} {label}") for label, c in AB_CHOICES[choice](cfg).items()}


def run_estimate_s(configs: dict[str, ModelConfig], tc: TrainConfig, data: Dataset, device: str) -> float:
    """Seconds the runs should take: per config, `steps` forward + backward passes and the evaluations' forward
    passes, each from closed-form FLOPs at the device's measured peak (engine.measure.estimate.call_seconds)."""
    dev = resolve_device(device)   # the device train() will run on: auto is CUDA where there is one
    evals = (tc.steps // tc.eval_every + 2) * tc.eval_batches
    return sum(tc.steps * call_seconds(m, tc.batch, tc.seq, "train", "fp32", dev)
               + evals * call_seconds(m, tc.batch, tc.seq, "forward", "fp32", dev)
               for m in (model_for(c, data, tc) for c in configs.values()))


class TrainJob(QueuedJob):
    def __init__(self, configs: dict[str, ModelConfig], tc: TrainConfig, data: Dataset, store=None,
                 device: str = "auto", ticket: Ticket | None = None):
        self.configs, self.tc, self.data, self.store, self.device = configs, tc, data, store, device
        self.records: dict[str, list[StepRecord]] = {label: [] for label in configs}
        self.results: dict[str, RunResult] = {}
        self.error: str | None = None
        self.ticket = ticket
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="explorer-train")

    def start(self) -> "TrainJob":
        self._thread.start()
        return self

    def _run(self) -> None:
        with self.turn() as go:
            if not go:
                return
            try:
                for label, cfg in self.configs.items():
                    if self.stop.is_set():
                        break
                    self.results[label] = train(cfg, self.tc, self.data, device=self.device,
                                                on_step=self.records[label].append, stop=self.stop, store=self.store)
            except Exception as e:  # noqa: BLE001 -- shown on the page; a thread has nobody else to raise to
                self.error = f"{type(e).__name__}: {e}"

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def total_steps(self) -> int:
        return self.tc.steps * len(self.configs)

    @property
    def steps_done(self) -> int:
        """Optimizer steps taken so far over all runs (a run that ended early counts only what it trained)."""
        return sum(len(recs) for recs in self.records.values())

    @property
    def progress(self) -> float:
        """Share of all steps of all runs done (a run that ended early counts as complete)."""
        done = sum(self.tc.steps if label in self.results else len(recs) for label, recs in self.records.items())
        return min(1.0, done / self.total_steps)
