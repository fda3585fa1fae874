"""Helpers shared by several test files (test files never import each other): a hypothesis strategy for any
valid tiny config, the block layouts and KV kinds, the variant grid derived from the config's declarations,
and the Lecture page's worked numbers."""
from __future__ import annotations

import functools
import itertools
import random

import numpy as np
import pytest

from hypothesis import assume
from hypothesis import strategies as st

from engine.config import FIELDS, ConfigError, ModelConfig

LAYOUTS = {"serial": dict(block="serial"),
           "parallel-shared": dict(block="parallel", parallel_shared_norm=True),
           "parallel-separate": dict(block="parallel", parallel_shared_norm=False)}
KV = {"MHA": None, "GQA": 2, "MQA": 1}


@st.composite
def moe_fields(draw) -> dict:
    """The mixture-of-experts knobs: dense (n_experts null) about half the time."""
    n_experts = draw(st.none() | st.integers(1, 8))
    groups = draw(st.sampled_from([g for g in (1, 2, 4) if n_experts and n_experts % g == 0] or [1]))
    return dict(
        n_experts=n_experts, experts_per_token=draw(st.integers(1, 4)),
        expert_d_ff=draw(st.none() | st.integers(1, 12)), n_shared_experts=draw(st.none() | st.integers(1, 2)),
        shared_d_ff=draw(st.none() | st.integers(1, 12)), shared_expert_gate=draw(st.booleans()),
        moe_first_dense=draw(st.none() | st.integers(1, 1)), moe_every=draw(st.integers(1, 2)),
        router=draw(st.sampled_from(FIELDS["router"].choices)), router_renorm=draw(st.booleans()),
        router_selection_bias=draw(st.booleans()), selection_bias_parameter=draw(st.booleans()),
        router_groups=groups,
        router_group_topk=draw(st.integers(1, groups)),
        router_group_score=draw(st.sampled_from(FIELDS["router_group_score"].choices)),
        routed_scale=draw(st.floats(0.5, 3)),
        expert_bias=draw(st.booleans()), router_scales_input=draw(st.booleans()), aux_loss_coef=draw(st.floats(0, 0.1)),
        z_loss_coef=draw(st.floats(0, 0.01)))


@st.composite
def mla_fields(draw) -> dict:
    """Latent attention about a third of the time, with the settings MLA requires (rope, one key/value head
    per query head, no window, QK-norm or soft-cap); otherwise the MLA sizes are drawn but unused."""
    values = dict(kv_lora_rank=draw(st.none() | st.integers(1, 10)), q_lora_rank=draw(st.none() | st.integers(1, 10)),
                  qk_rope_head_dim=draw(st.sampled_from([2, 4, 6])), qk_nope_head_dim=draw(st.integers(1, 6)),
                  v_head_dim=draw(st.integers(1, 6)), mla_rope_interleave=draw(st.booleans()),
                  rope_mscale_all_dim=draw(st.none() | st.floats(0.1, 2)),
                  mla_norm_eps=draw(st.none() | st.floats(1e-8, 1e-2)),
                  index_topk=draw(st.none() | st.integers(1, 6)), index_n_heads=draw(st.integers(1, 4)),
                  index_head_dim=draw(st.integers(6, 10)), index_rope_interleave=draw(st.booleans()))
    if values["kv_lora_rank"] is not None and draw(st.integers(0, 2)) == 0:
        return values
    return dict(values, kv_lora_rank=None)


@st.composite
def gdn_fields(draw) -> dict:
    """Gated DeltaNet sizes (used only when a layer_types entry is gdn): nv a multiple of nk."""
    k_heads = draw(st.none() | st.integers(1, 3))
    return dict(gdn_k_heads=k_heads, gdn_v_heads=None if k_heads is None else k_heads * draw(st.integers(1, 2)),
                gdn_k_dim=draw(st.none() | st.integers(1, 6)), gdn_v_dim=draw(st.none() | st.integers(1, 6)),
                gdn_conv_kernel=draw(st.integers(1, 4)), gdn_chunk=draw(st.integers(1, 8)))


@st.composite
def ssm_fields(draw) -> dict:
    """Mamba-2 and Mamba-1 sizes (used only when a layer_types entry is mamba2 / mamba1): groups dividing the heads."""
    heads = draw(st.integers(1, 4))
    return dict(ssm_state=draw(st.integers(1, 5)), ssm_conv_kernel=draw(st.integers(1, 4)),
                ssm_conv_bias=draw(st.booleans()), ssm_proj_bias=draw(st.booleans()), ssm_chunk=draw(st.integers(1, 8)),
                ssm_heads=heads, ssm_head_dim=draw(st.integers(1, 4)),
                ssm_groups=draw(st.sampled_from([g for g in range(1, heads + 1) if heads % g == 0])),
                ssm_gate=draw(st.sampled_from(FIELDS["ssm_gate"].choices)), ssm_dt_min=draw(st.floats(0, 0.1)),
                ssm_dt_max=draw(st.none() | st.floats(1, 10)), ssm_in_scale=draw(st.floats(0.5, 2)),
                ssm_proj_scales=draw(st.none() | st.lists(st.floats(0.5, 2), min_size=5, max_size=5).map(tuple)),
                ssm_out_scale=draw(st.floats(0.5, 2)), ssm_inner=draw(st.none() | st.integers(1, 12)),
                ssm_dt_rank=draw(st.none() | st.integers(1, 4)), ssm_dt_norm=draw(st.booleans()))


def _mla_compatible(values: dict) -> dict:
    if values["kv_lora_rank"] is None or values["q_lora_rank"] is None:   # sparse attention needs both latents
        values = dict(values, index_topk=None)
    if values["kv_lora_rank"] is None:
        return values
    return dict(values, position=values["position"] if values["position"] == "none" else "rope", n_kv_heads=None,
                head_dim=None, rope_fraction=1.0, attn_window=None, qk_norm=False, attn_softcap=None,
                nope_layers=None, attn_sinks=False, attn_gate=None, attn_chunk=None, attn_temperature=None)


@st.composite
def checkpoint_fields(draw) -> dict:
    """How the checkpoint ships (engine/checkpoint.py): any format, with the fields only its kind takes."""
    fmt = draw(st.sampled_from(FIELDS["ckpt_format"].choices))
    bits = draw(st.sampled_from([None, 2, 3, 4, 8])) if fmt in ("awq", "gptq") else None
    return dict(ckpt_format=fmt, ckpt_bits=bits,
                ckpt_group_size=draw(st.none() | st.integers(1, 256)),
                ckpt_double_quant=fmt in ("bnb_nf4", "bnb_fp4") and draw(st.booleans()),
                ckpt_keep=draw(st.none() | st.lists(st.sampled_from(FIELDS["ckpt_keep"].choices), min_size=1,
                                                    max_size=3, unique=True).map(tuple)))


@st.composite
def configs(draw, max_d: int = 24) -> ModelConfig:
    """Any valid config at tiny sizes: sizes and every knob drawn; invalid combinations are filtered out."""
    n_heads, n_layers = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    divisors = [k for k in range(1, n_heads + 1) if n_heads % k == 0]
    opt = lambda s: st.none() | s  # noqa: E731
    values = dict(
        name=draw(st.text(min_size=1, max_size=12).filter(str.strip)),   # a config needs a label
        vocab_size=draw(st.integers(1, 40)), context_length=draw(st.integers(1, 12)),
        d_model=draw(st.integers(1, max_d)), n_layers=n_layers, n_heads=n_heads,
        n_kv_heads=draw(opt(st.sampled_from(divisors))), head_dim=draw(opt(st.integers(1, 8))),
        attn_window=draw(opt(st.integers(1, 6))), global_every=draw(opt(st.integers(1, 3))),
        qk_norm=draw(st.booleans()), attn_softcap=draw(opt(st.floats(0.5, 50))), qkv_bias=draw(st.booleans()),
        position=draw(st.sampled_from(FIELDS["position"].choices)), rope_base=draw(st.floats(2, 1e6)),
        rope_fraction=draw(st.sampled_from([0.25, 0.5, 1.0]) | st.floats(0, 1, exclude_min=True)),
        ffn=draw(st.sampled_from(FIELDS["ffn"].choices)), d_ff=draw(opt(st.integers(1, 40))),
        ffn_multiple_of=draw(st.integers(1, 16)), norm=draw(st.sampled_from(FIELDS["norm"].choices)),
        norm_eps=draw(st.floats(1e-8, 1e-2)), norm_affine=draw(st.booleans()), embed_norm=draw(st.booleans()),
        norm_placement=draw(st.sampled_from(FIELDS["norm_placement"].choices)), final_norm=draw(st.booleans()),
        block=draw(st.sampled_from(FIELDS["block"].choices)), parallel_shared_norm=draw(st.booleans()),
        bias=draw(st.booleans()), dropout=draw(st.sampled_from([0.0, 0.1]) | st.floats(0, 0.9)),
        tie_embeddings=draw(st.booleans()), embed_scale=draw(st.booleans()),
        logit_softcap=draw(opt(st.floats(0.5, 50))),
        rope_scaling=draw(st.sampled_from(FIELDS["rope_scaling"].choices)), rope_factor=draw(st.floats(0.5, 16)),
        rope_original_context=draw(opt(st.integers(1, 12))), rope_low_freq_factor=draw(st.floats(0.5, 2)),
        rope_high_freq_factor=draw(st.floats(2.5, 8)), rope_beta_fast=draw(st.floats(1, 64)),
        rope_beta_slow=draw(st.floats(0.25, 2)), rope_truncate=draw(st.booleans()),
        rope_attention_factor=draw(opt(st.floats(0.5, 2))),
        rope_short_factor=draw(opt(st.lists(st.floats(0.5, 4), min_size=1, max_size=4).map(tuple))),
        rope_long_factor=draw(opt(st.lists(st.floats(0.5, 4), min_size=1, max_size=4).map(tuple))),
        layer_types=draw(opt(st.lists(st.sampled_from(FIELDS["layer_types"].choices), min_size=n_layers,
                                      max_size=n_layers).map(tuple))),   # one per layer
        ffn_types=draw(opt(st.lists(st.sampled_from(FIELDS["ffn_types"].choices), min_size=n_layers,
                                    max_size=n_layers).map(tuple))),
        state_dtype=draw(st.sampled_from((None,) + FIELDS["state_dtype"].choices)),
        attn_gate=draw(st.sampled_from((None,) + FIELDS["attn_gate"].choices)),
        attn_chunk=draw(st.integers(1, 6)), attn_temperature=draw(opt(st.floats(0.01, 1))),
        attn_temperature_floor=draw(st.integers(1, 8)), attn_temperature_one_based=draw(st.booleans()),
        attn_temperature_layers=draw(st.sampled_from(FIELDS["attn_temperature_layers"].choices)),
        embed_dropout=draw(st.booleans()),
        attn_scale=draw(opt(st.floats(0.01, 2))), rope_local_base=draw(opt(st.floats(2, 1e6))),
        nope_layers=draw(opt(st.lists(st.integers(1, n_layers), min_size=1, max_size=3).map(tuple))),
        head_bias=draw(st.booleans()), logit_scale=draw(st.floats(0.01, 4)), attn_sinks=draw(st.booleans()),
        swiglu_limit=draw(st.floats(0.5, 10)), swiglu_alpha=draw(st.floats(0.5, 2)),
        mtp_depth=draw(opt(st.integers(1, 2))), attn_out_scale=draw(st.floats(0.25, 2)),
        ffn_gate_scale=draw(st.floats(0.25, 2)), ffn_out_scale=draw(st.floats(0.25, 2)),
        embed_multiplier=draw(st.floats(0.25, 4)), residual_alpha=draw(st.floats(0.25, 4)),
        indexer_types=draw(opt(st.lists(st.sampled_from(["full", "shared"]), min_size=n_layers - 1,
                                        max_size=n_layers - 1).map(lambda rest: ("full", *rest)))))
    values["norm_bias"] = values["norm"] == "layernorm" and draw(st.booleans())
    values.update(qk_norm_scope=draw(st.sampled_from(FIELDS["qk_norm_scope"].choices)), **draw(moe_fields()),
                  **draw(mla_fields()), **draw(gdn_fields()), **draw(ssm_fields()), **draw(checkpoint_fields()))
    values = _mla_compatible(values)
    assert set(values) == set(FIELDS), "a new field needs a strategy here"
    try:
        return ModelConfig(**values)
    except ConfigError:
        assume(False)


# ---- the variant grid: a small set of tiny configs covering every pair of variant choices ----------------------
# Every declared choice and every boolean comes from engine/config.py's FIELDS (default first), so a new choice
# or switch is in the grid without touching this file; knobs with a numeric range get the values below.
# A greedy all-pairs construction then picks configs until each value of each knob has met each value of every
# other knob at least once; the closed forms are held against measurements on this grid.
GRID_SIZES = dict(vocab_size=13, context_length=16, d_model=16, n_layers=2, n_heads=4)
# knobs every grid config sets: the chunk of the chunked layers, a temperature step within the 16 tokens
GRID_FIXED = dict(attn_chunk=3, attn_temperature_floor=4)
RANGE_VALUES: dict[str, list] = {"rope_fraction": [1.0, 0.5], "n_kv_heads": [None, 2, 1], "head_dim": [None, 8],
                                 "attn_window": [None, 3], "global_every": [None, 2], "attn_softcap": [None, 5.0],
                                 "logit_softcap": [None, 3.0], "dropout": [0.0, 0.1],
                                 # RoPE scaling: longrope needs lists sized to the head and dynamic a rotary width
                                 # of 4 (the 0.5 fraction here gives 2); both are held against transformers instead
                                 "rope_scaling": ["none", "linear", "llama3", "yarn"], "rope_factor": [1.0, 4.0],
                                 "layer_types": [None, ("sliding", "full"), ("gdn", "full"), ("full+gdn", "gdn"),
                                                 ("chunked", "sliding"), ("mamba2", "full"), ("sliding+mamba2", "mamba1"),
                                                 ("kda", "full+lightning"), ("lightning", "sliding+kda")],
                                 "ssm_state": [128, 3], "ssm_head_dim": [64, 4], "ssm_chunk": [256, 3],
                                 "attn_out_scale": [1.0, 0.5], "ffn_gate_scale": [1.0, 0.5],
                                 "ffn_out_scale": [1.0, 2.0], "embed_multiplier": [1.0, 3.0], "residual_alpha": [1.0, 2.0],
                                 "gdn_v_heads": [None, 8], "gdn_conv_kernel": [4, 1], "gdn_chunk": [64, 5],
                                 "attn_temperature": [None, 0.5],
                                 "attn_scale": [None, 0.3],
                                 "rope_local_base": [None, 100.0], "nope_layers": [None, (1,)],
                                 "logit_scale": [1.0, 0.5]}
IMPLIED = {"norm_bias"}   # set by make() from norm (rmsnorm has no bias)


def _axes() -> dict[str, list]:
    axes = {}
    for name, spec in FIELDS.items():
        if spec.group == "checkpoint":    # how the files store the weights: no module or closed form changes
            continue                      # (engine/checkpoint.py is held against the published files instead)
        if name in RANGE_VALUES:
            axes[name] = RANGE_VALUES[name]
        elif spec.choices and spec.type is not tuple:
            axes[name] = [spec.default] + [c for c in spec.choices if c != spec.default]
        elif spec.type is bool and name not in IMPLIED:
            axes[name] = [spec.default, not spec.default]
    return axes


AXES = _axes()


def make(choice: dict) -> ModelConfig:
    """A tiny config with these choices (rmsnorm implies norm_bias=False)."""
    return ModelConfig(**{**GRID_SIZES, **GRID_FIXED, **choice}, norm_bias=choice.get("norm", "layernorm") == "layernorm")


def pairwise_variants(seed: int = 0, candidates: int = 30, axes: dict[str, list] | None = None) -> list[dict]:
    """Greedy all-pairs over `axes` (AXES): each round keeps, of `candidates` random configs, the one covering
    most new pairs."""
    grid = AXES if axes is None else axes
    return [dict(d) for d in _pairwise(seed, candidates, tuple((k, tuple(v)) for k, v in grid.items()))]


@functools.cache
def _pairwise(seed: int, candidates: int, axes: tuple) -> tuple[dict, ...]:
    grid = {k: list(v) for k, v in axes}
    rng = random.Random(seed)
    names = list(grid)
    # every pair of (axis, value) choices, numbered in repr order (the order a round draws its forced pair from);
    # a config's pairs are then one gather: offset of the axis pair + value index of x * len(y) + that of y
    axis_pairs = list(itertools.combinations(range(len(names)), 2))
    sizes = [len(grid[n]) for n in names]
    offset = np.cumsum([0] + [sizes[x] * sizes[y] for x, y in axis_pairs])
    xs, ys = np.array([x for x, _ in axis_pairs]), np.array([y for _, y in axis_pairs])
    width = np.array([sizes[y] for y in ys])
    pairs = [((names[x], grid[names[x]][i]), (names[y], grid[names[y]][j]))
             for x, y in axis_pairs for i in range(sizes[x]) for j in range(sizes[y])]
    in_repr_order = np.array(sorted(range(len(pairs)), key=lambda n: repr(pairs[n])))
    todo = np.ones(len(pairs), dtype=bool)

    def covered(pick: dict) -> np.ndarray:
        at = np.array([grid[n].index(pick[n]) for n in names])
        return offset[:-1] + at[xs] * width + at[ys]

    chosen = []
    while todo.any():
        best, gain, open_pairs = None, 0, in_repr_order[todo[in_repr_order]]
        for _ in range(candidates):
            (a, va), (b, vb) = pairs[open_pairs[rng.randrange(len(open_pairs))]]   # force one uncovered pair
            pick = {k: rng.choice(v) for k, v in grid.items()} | {a: va, b: vb}
            got = int(todo[covered(pick)].sum())
            if got > gain:
                best, gain = pick, got
        todo[covered(best)] = False
        chosen.append(best)
    return tuple(chosen)


def variant_configs(seed: int = 0) -> list[ModelConfig]:
    """One config per single-knob change from the default, then the pairwise grid, then the MLA grid."""
    return list(_variant_configs(seed))


@functools.cache   # the greedy all-pairs takes seconds and five test files ask for it: once per process
def _variant_configs(seed: int) -> tuple[ModelConfig, ...]:
    return (*_build([{}]), *_single_configs(), *_build(pairwise_variants(seed)), *mla_variant_configs(seed))


@functools.cache
def _single_configs() -> tuple[ModelConfig, ...]:
    """One config per value of each axis other than its default, every other knob at its default."""
    return tuple(_build([{k: v} for k, vals in AXES.items() for v in vals[1:]]))


def grid_cases(configs: list[ModelConfig], impls: tuple[str, ...] = ("sdpa", "explicit"), step: int = 1) -> list:
    """(index into configs, attention impl) for a grid test over every `step`-th config. The inner loop
    (`make test-fast`: -m "engine and not slow") keeps every pair of choices, on SDPA: the pairwise and MLA grids.
    Marked slow, for `make test` and the mutation runs: the explicit path, and the single-knob configs (each of
    their values is also in the pairwise grid, there beside every value of every other knob)."""
    singles = set(_single_configs())
    return [pytest.param(i, impl, marks=[pytest.mark.slow] if impl != impls[0] or configs[i] in singles else [],
                         id=f"{i}-{impl}") for i in range(0, len(configs), step) for impl in impls]


def _build(choices: list[dict], base: dict | None = None) -> list[ModelConfig]:
    out = []
    for choice in choices:
        try:
            out.append(make({**(base or {}), **choice}))
        except ConfigError as e:       # an invalid pair would be reported, not hidden
            raise AssertionError(f"variant grid produced an invalid config {choice}: {e}") from None
    return out


# ---- the MLA grid: latent attention and DeepSeek Sparse Attention crossed with every knob MLA takes ----------
# MLA fixes the knobs below (rope on a decoupled key, one key/value head per query head, full causal attention
# before the indexer's choice, no QK-norm, soft-cap or sinks); every other axis of AXES is crossed with
# its own: sparse or dense, an indexer in every layer or a shared second one (GLM-5.2), value heads as wide as
# the query/key heads (SDPA's flash kernel) or not (its math path), the latent norms' own eps. index_topk 3 binds
# at the closed-form tests' 6 tokens.
MLA_BASE = dict(position="rope", kv_lora_rank=6, q_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4,
                index_n_heads=2, index_head_dim=6, attn_chunk=None)
MLA_FIXED = {"position", "n_kv_heads", "head_dim", "rope_fraction", "attn_window", "global_every", "qk_norm",
             "qk_norm_scope", "attn_softcap", "nope_layers", "attn_sinks", "layer_types", "rope_local_base",
             "qkv_bias", "attn_chunk", "attn_temperature", "attn_gate"}
MLA_AXES = {k: v for k, v in AXES.items() if k not in MLA_FIXED} | {
    "index_topk": [3, None], "indexer_types": [None, ("full", "shared")], "v_head_dim": [6, 8],
    "mla_norm_eps": [None, 1e-3]}


def mla_variant_configs(seed: int = 0) -> list[ModelConfig]:
    """MLA and sparse-attention configs: one per single change of an MLA axis, then all pairs of MLA_AXES."""
    singles = [{k: v} for k in ("index_topk", "indexer_types", "v_head_dim", "mla_norm_eps", "index_rope_interleave",
                                "mla_rope_interleave") for v in MLA_AXES[k][1:]]
    return _build([{}] + singles + pairwise_variants(seed, axes=MLA_AXES), base=MLA_BASE)


# section -> metric label -> the value the page must show (the worked numbers of the teaching material)
LECTURE_NUMBERS = {
    "activations": {"GELU(-1)": "-0.158655", "ReLU(-1)": "0.000000", "SiLU(2)": "1.7616"},
    "gating": {"dense, d_ff 3,072": "4,718,592", "gated, d_ff 2,048": "4,718,592", "gated, d_ff 3,072": "7,077,888"},
    "parallel": {"serial: FFN reads this block's attention": "yes", "parallel: FFN reads this block's attention": "no"},
    "tying": {"shared Parameter: unique params": "15", "detached clone: unique params": "30",
              "handout nanoGPT config, tied": "1,872", "same config, untied": "1,932",
              "parameters saved (V·D)": "24,576,000", "bf16 weights": "46.875 MiB",
              "training at 12 B/param": "281.250 MiB", "+ fp32 master copy": "93.750 MiB"},
    "gradient": {"absent rows: max |grad − p_j·h|": "0.0e+00"},
    "norms": {"RMSNorm(x)": "(0.8485, 1.1314)", "LayerNorm(x)": "(-1.0000, 1.0000)"},
    "rope": {"score at positions (0, 1)": "0.8660", "score at positions (2, 3)": "0.8660"},
    "zloss": {"probabilities": "(0.5000, 0.5000)", "probabilities, shifted": "(0.5000, 0.5000)",
              "log Z": "0.6931", "log Z, shifted": "10.6931"},
    "softcap": {"masked key, cap then mask": "0.0000", "engine: weight on a future key": "0.0000"},
    "kvcache": {"MHA (32 KV heads)": "4.00 GiB", "GQA-8 (8 KV heads)": "1.00 GiB", "MQA (1 KV head)": "128.00 MiB"},
    "mla": {"MHA": "36.00 KiB/token", "MQA": "3.00 KiB/token", "MLA latent": "6.75 KiB/token",   # gpt2: 12 layers,
            "MLA expanded": "45.00 KiB/token"},                                                  # 12 heads of 64
    "state": {"softmax attention, every layer, at 1M tokens": "36.00 GiB",   # gpt2: 12 x 2 x 12 x 64 x 2 B x 2^20
              # 12 layers x (12 x 64 x 64 state + 3 x 2,304 conv) x 2 B = 1,345,536 B
              "Gated DeltaNet, every layer, at 1M tokens": "1.28 MiB",
              "hybrid: 3 attention of 12, at 1M tokens": "9.00 GiB"},
    "moe": {"stored parameters": "46,702,792,704", "used per token": "12,879,925,248", "bf16 weights": "86.99 GiB"},
    "sweeps": {"KV cache, n_kv_heads=1": "3.00 MiB", "KV cache, n_kv_heads=12": "36.00 MiB",   # gpt2: 12 layers, 1,024
               "total parameters, n_kv_heads=12": "124,439,808"},
    "heads": {"attention width A = H·d_h": "12", "D mod H": "1", "q_proj weight": "12 × 10", "o_proj weight": "10 × 12",
              "logits": "1 × 5 × 16"},
    "depth": {"block params L=12, D=768": "84,934,656", "block params L=48, D=384": "84,934,656",
              "KV cache ratio": "2×", "sequential depth ratio": "4×"},
    "microgpt": {"by hand": "4,224", "engine closed form": "4,224", "engine, built model": "4,224"},
}


# ---- real-browser and AppTest waits: conditions, never sleeps; generous, for a loaded shared machine ----------
# At load 20 on two cores a page took a minute to draw; a wait this long only ever costs time when something is
# really stuck. conftest's `browser` makes it every page's default; `new_app` gives AppTest runs APP_WAIT_S.
BROWSER_WAIT_MS = 300_000
APP_WAIT_S = 300
SUBPROCESS_WAIT_S = 900     # a CLI or torchrun test's child process: a stall guard, never a speed check
