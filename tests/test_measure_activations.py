"""The activation closed form against saved_tensors_hooks, for every pair of variant choices, both paths.

The closed form is documented as exact on CPU (engine/budget/activations.py), so every comparison is `==`:
a dropped term as small as the attention logsumexp must fail here, not hide inside a tolerance."""
import pytest

from engine.budget.activations import activation_estimate
from engine.layers.ffn import ffn_saved_bytes
from engine.measure.activations import measure_activations
from tests.helpers import AXES, grid_cases, make, pairwise_variants, variant_configs

CONFIGS = variant_configs()


def test_grid_covers_every_pair_of_choices():
    import itertools
    grid = pairwise_variants()
    for a, b in itertools.combinations(AXES, 2):
        seen = {(g[a], g[b]) for g in grid}
        assert seen == set(itertools.product(AXES[a], AXES[b])), (a, b)


@pytest.mark.parametrize("i, impl", grid_cases(CONFIGS))
def test_activation_estimate_equals_saved_bytes(i, impl):
    cfg = CONFIGS[i]
    m = measure_activations(cfg, batch=2, seq=6, impl=impl)
    assert m.estimate == m.measured, (cfg, m)


@pytest.mark.parametrize("i, impl", grid_cases(CONFIGS, step=4))
def test_low_precision_equals_saved_bytes(i, impl):
    """bf16 and fp16 take turns over the configs: the closed form treats them alike (2-byte values, fp32 norm
    and softmax statistics), so each needs the spread of knobs, not every config twice."""
    dtype = ("bf16", "fp16")[i // 4 % 2]
    m = measure_activations(CONFIGS[i], batch=2, seq=6, impl=impl, dtype=dtype)
    assert m.estimate == m.measured, (CONFIGS[i], dtype, m)


@pytest.mark.parametrize("batch,seq", [(1, 1), (3, 2), (1, 9)])
def test_other_sizes(batch, seq):
    cfg = make({"attn_window": 4, "position": "rope", "rope_fraction": 0.5, "n_kv_heads": 2, "dropout": 0.1})
    for impl in ("sdpa", "explicit"):
        m = measure_activations(cfg, batch, seq, impl)
        assert m.estimate == m.measured, (batch, seq, impl, m)


def test_recompute_is_ordered_and_full_keeps_block_inputs():
    cfg = make({"dropout": 0.1})
    none, sel, full = (activation_estimate(cfg, 2, 6, "fp32", "explicit", r) for r in ("none", "selective", "full"))
    assert full.total < sel.total < none.total
    tok = 2 * 6 * cfg.d_model * 4
    assert full.per_layer == [tok] * cfg.n_layers
    assert full.total == full.embedding + full.head + cfg.n_layers * tok + max(none.per_layer)
    assert none.total - sel.total == none.terms["attn_scores"] + none.terms["attn_mask"]


def test_the_breakdown_names_the_ffn_part():
    """The Activations page lists the saved bytes by part; a dense block's FFN is the part called "ffn"."""
    cfg = make({"ffn": "swiglu"})
    est = activation_estimate(cfg, 2, 6, "fp32", "sdpa")
    assert est.terms["ffn"] == cfg.n_layers * ffn_saved_bytes(cfg, 2 * 6, 4)
    assert all(isinstance(name, str) and name for name in est.terms)


def test_per_layer_and_parts_add_up():
    est = activation_estimate(make({"attn_window": 3, "global_every": 2}), 2, 6, "bf16", "sdpa")
    assert est.total == est.embedding + sum(est.per_layer) + est.head
    assert est.per_layer[0] > est.per_layer[1]          # layer 2 is global: no window mask
    assert sum(est.terms.values()) == est.total


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_local_rope_tables_and_nope_layers(dtype):
    """Gemma-3 style: window layers with their own RoPE base (a second table set), a NoPE layer, an ALiBi-free
    custom score scale; three layers so every kind occurs."""
    cfg = make({"position": "rope", "attn_window": 3, "global_every": 2, "rope_local_base": 100.0,
                "attn_scale": 0.3}).replace(n_layers=4, nope_layers=(4,))
    assert [cfg.layer_rope(i) for i in range(4)] == ["local", "global", "local", None]
    for impl in ("sdpa", "explicit"):
        m = measure_activations(cfg, 2, 6, impl, dtype=dtype)
        assert abs(m.error_pct) <= 2.0, (impl, m)


def test_with_dropout_the_math_path_keeps_q_k_v_broadcast_in_fp32_under_attn_qkv():
    """Dropout sends SDPA to its math path: q, k^T and v broadcast to all H heads, in fp32 whatever the dtype --
    3 * B*T * (H * head width) * 4 bytes per layer, listed as the breakdown's "attn_qkv" part."""
    cfg = make({"dropout": 0.1})
    est = activation_estimate(cfg, 2, 6, "bf16", "sdpa")
    assert est.terms["attn_qkv"] == cfg.n_layers * 3 * (2 * 6) * (cfg.n_heads * cfg.head_width) * 4
    assert all(isinstance(name, str) and name for name in est.terms)


def test_without_a_dtype_the_estimate_is_fp32s():
    """A model trains in fp32 unless told otherwise: the estimate called without a dtype is the bytes an fp32
    training forward saves."""
    cfg = make({"ffn": "swiglu"})
    m = measure_activations(cfg, 2, 6)
    assert activation_estimate(cfg, 2, 6).total == m.measured == activation_estimate(cfg, 2, 6, "fp32").total


def test_selective_recompute_drops_mlas_softmax_and_mask():
    """MLA on the explicit path, fp32, batch 2, 6 tokens: selective recompute gives back per layer the fp32
    softmax [B, H, T, T] (4 bytes each) and the bool mask [T, T], the parts the breakdown lists as attn_scores
    and attn_mask."""
    from tests.helpers import MLA_BASE
    cfg = make(dict(MLA_BASE))
    B, T, H = 2, 6, cfg.n_heads
    none, sel = (activation_estimate(cfg, B, T, "fp32", "explicit", r) for r in ("none", "selective"))
    assert none.terms["attn_scores"] == cfg.n_layers * B * H * T * T * 4
    assert none.terms["attn_mask"] == cfg.n_layers * T * T
    assert none.total - sel.total == cfg.n_layers * (B * H * T * T * 4 + T * T)
