"""A small grid of tiny configs that covers every pair of variant choices (a pairwise covering array).

Every knob with discrete choices gets a few values; a greedy all-pairs construction then picks configs until
each value of each knob has met each value of every other knob at least once. The closed forms are held
against measurements on this grid (tests, `--measure`), so an interaction between two variants cannot hide.
"""
from __future__ import annotations

import itertools
import random

from engine.config import ConfigError, ModelConfig

TINY = dict(vocab_size=13, context_length=16, d_model=16, n_layers=2, n_heads=4)

AXES: dict[str, list] = {
    "norm": ["layernorm", "rmsnorm"],
    "norm_affine": [True, False],
    "norm_placement": ["pre", "post", "sandwich"],
    "block": ["serial", "parallel"],
    "parallel_shared_norm": [False, True],
    "ffn": ["relu", "gelu", "gelu_tanh", "silu", "swiglu", "geglu", "geglu_tanh", "reglu"],
    "position": ["learned", "sinusoidal", "rope", "alibi", "none"],
    "rope_fraction": [1.0, 0.5],
    "n_kv_heads": [None, 2, 1],
    "head_dim": [None, 8],
    "attn_window": [None, 3],
    "global_every": [None, 2],
    "qk_norm": [False, True],
    "attn_softcap": [None, 5.0],
    "logit_softcap": [None, 3.0],
    "tie_embeddings": [True, False],
    "embed_scale": [False, True],
    "embed_norm": [False, True],
    "final_norm": [True, False],
    "dropout": [0.0, 0.1],
    "bias": [True, False],
    "qkv_bias": [False, True],
    "rope_local_base": [None, 100.0],
    "nope_layers": [None, (1,)],
    "attn_scale": [None, 0.3],
}


def make(choice: dict) -> ModelConfig:
    """A tiny config with these choices (rmsnorm implies norm_bias=False)."""
    return ModelConfig(**TINY, **choice, norm_bias=choice.get("norm", "layernorm") == "layernorm")


def pairwise_variants(seed: int = 0, candidates: int = 30) -> list[dict]:
    """Greedy all-pairs: each round keeps, of `candidates` random configs, the one covering most new pairs."""
    rng = random.Random(seed)
    names = list(AXES)
    todo = {((a, va), (b, vb)) for a, b in itertools.combinations(names, 2) for va in AXES[a] for vb in AXES[b]}
    chosen = []
    while todo:
        best, gain, open_pairs = None, 0, sorted(todo, key=repr)
        for _ in range(candidates):
            (a, va), (b, vb) = rng.choice(open_pairs)   # force one uncovered pair: progress every round
            pick = {k: rng.choice(v) for k, v in AXES.items()} | {a: va, b: vb}
            got = sum(((x, pick[x]), (y, pick[y])) in todo for x, y in itertools.combinations(names, 2))
            if got > gain:
                best, gain = pick, got
        todo -= {((x, best[x]), (y, best[y])) for x, y in itertools.combinations(names, 2)}
        chosen.append(best)
    return chosen


def variant_configs(seed: int = 0) -> list[ModelConfig]:
    """One config per single-knob change from the default, then the pairwise grid."""
    singles = [{k: v} for k, vals in AXES.items() for v in vals[1:]]
    out = []
    for choice in [{}] + singles + pairwise_variants(seed):
        try:
            out.append(make(choice))
        except ConfigError as e:       # an invalid pair (none here today) would be reported, not hidden
            raise AssertionError(f"variant grid produced an invalid config {choice}: {e}") from None
    return out
