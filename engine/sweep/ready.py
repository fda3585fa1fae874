"""Ready-made sweeps for the lecture's trade-offs, each one click on the Lecture page: the knob, how its values
are chosen, what is held fixed, and which metrics tell the story."""
from __future__ import annotations

from dataclasses import dataclass

from engine.config import ModelConfig
from engine.sweep.table import Sweep, run_sweep


@dataclass(frozen=True)
class ReadySweep:
    title: str
    knob: str
    values: tuple | None          # None: the knob's default grid for the config
    hold: str | None
    hold_target: str
    metrics: tuple[str, ...]      # the panels that carry the point
    x: str                        # Pareto axes
    y: str
    caption: str


READY: dict[str, ReadySweep] = {
    "gqa": ReadySweep("GQA groups vs KV cache", "n_kv_heads", None, None, "total",
                      ("kv_cache_bytes", "total_params", "flops_per_token"), "kv_cache_bytes", "total_params",
                      "Fewer key/value heads: the cache shrinks in proportion, the parameters barely move."),
    "gating": ReadySweep("Gated vs dense FFN at matched parameters", "ffn", ("gelu", "swiglu"), "d_ff", "total",
                         ("total_params", "flops_per_token", "train_memory_bytes"), "flops_per_token",
                         "train_memory_bytes",
                         "Three matrices instead of two: d_ff shrinks to 2/3 so the count stays the same."),
    "depth": ReadySweep("Depth vs width at equal block parameters", "n_layers", None, "d_model", "non_embedding",
                        ("non_embedding_params", "kv_cache_bytes", "train_memory_bytes"), "kv_cache_bytes",
                        "train_memory_bytes",
                        "Same block parameters: deeper and narrower holds more KV cache and more activations."),
    "window": ReadySweep("Sliding window vs KV cache and FLOPs", "attn_window", None, None, "total",
                         ("kv_cache_bytes", "flops_per_token"), "kv_cache_bytes", "flops_per_token",
                         "A window caps the cache and the attention FLOPs at w tokens; full attention grows with T."),
}


def run_ready(cfg: ModelConfig, name: str) -> Sweep:
    """The ready-made sweep `name` on `cfg` (ValueError naming the choices for an unknown name)."""
    if name not in READY:
        raise ValueError(f"sweep: {name!r} is not one of {', '.join(READY)}")
    r = READY[name]
    return run_sweep(cfg, {r.knob: None if r.values is None else list(r.values)}, hold=r.hold,
                     hold_target=r.hold_target)
