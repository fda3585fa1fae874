"""Every worked number of the lecture material, computed by engine.lecture, against the value the sources state
(and, where cheap, an independent hand formula)."""
import math

import pytest

from engine.config import ConfigError
from engine.lecture import (absent_token_gradient, activation_values, dense_activation_table, depth_vs_width,
                            flexible_heads, gating_match, handout_tying, kv_cache_variants, mask_order, microgpt_table,
                            norm_comparison, rope_score_grid, rope_scores, serial_vs_parallel, shared_vs_clone,
                            softcap_curve, tying_savings, zloss)

GIB, MIB = 1024 ** 3, 1024 ** 2


def test_activations_at_the_quoted_points():
    at_minus_one, at_two = activation_values(-1.0), activation_values(2.0)
    assert at_minus_one["gelu"] == pytest.approx(-0.158655, abs=5e-7)
    assert at_minus_one["gelu"] == pytest.approx(-1 * 0.5 * (1 + math.erf(-1 / math.sqrt(2))))
    assert at_minus_one["relu"] == 0.0
    assert at_minus_one["gelu_tanh"] != at_minus_one["gelu"]          # the tanh approximation differs
    assert at_two["silu"] == pytest.approx(1.762, abs=5e-4)
    assert at_two["silu"] > 1                                          # a gate value, not a probability
    assert at_two["silu"] == pytest.approx(2 * at_two["sigmoid"])
    assert activation_values(-1.0) == at_minus_one                     # deterministic


def test_dense_activation_table_and_bad_range():
    c = dense_activation_table(-2, 2, 5)
    assert c["z"] == [-2, -1, 0, 1, 2] and c["relu"] == [0, 0, 0, 1, 2]
    assert min(c["gelu"]) < 0
    with pytest.raises(ValueError, match="hi=.*greater than lo"):
        dense_activation_table(1, 1)


def test_gating_match_at_768():
    g = gating_match(768)
    assert g.dense_width == 3072 and g.gated_width == 2048
    assert g.dense_params == g.gated_params == 4_718_592 == 2 * 768 * 3072
    assert g.same_width_gated_params == 7_077_888 and g.same_width_extra == pytest.approx(0.5)
    assert g.dense_bias_params == 3840


def test_gating_two_thirds_rule_with_rounding():
    g = gating_match(1000, multiple_of=256)           # 2/3 * 4000 = 2666.7 -> 2816
    assert g.exact_gated_width == pytest.approx(8000 / 3)
    assert g.gated_width == 2816 and g.gated_width % 256 == 0
    assert g.gated_params == 3 * 1000 * 2816 and g.gated_gap == pytest.approx(2816 / (8000 / 3) - 1)
    assert gating_match(12, 48, 1).gated_params == gating_match(12, 48, 1).dense_params == 1152
    with pytest.raises(ValueError, match="multiple_of: 0"):
        gating_match(768, multiple_of=0)


def test_gating_rounding_matches_the_config_rule():
    from engine.config import ModelConfig
    for d in (768, 1000, 4096):
        assert gating_match(d, multiple_of=256).gated_width == ModelConfig(d_model=d, ffn="swiglu").ffn_width


def _ln(v, eps=1e-6):
    m = sum(v) / len(v)
    s = math.sqrt(sum((a - m) ** 2 for a in v) / len(v) + eps)
    return [(a - m) / s for a in v]


def test_serial_vs_parallel_on_1234():
    r = serial_vs_parallel((1, 2, 3, 4), 1e-6)
    n = _ln([1, 2, 3, 4])
    u = [1 + n[0], 2, 3, 4]
    serial = [a + b for a, b in zip(u, _ln(u))]
    parallel = [1 + 2 * n[0], 2 + n[1], 3 + n[2], 4 + n[3]]
    assert r.serial.output == pytest.approx(serial, abs=1e-9)
    assert r.parallel.output == pytest.approx(parallel, abs=1e-9)
    assert r.serial.output[0] == pytest.approx(-1.8978, abs=1e-4)
    assert r.parallel.output == pytest.approx([-1.6833, 1.5528, 3.4472, 5.3416], abs=1e-4)
    assert r.serial.ffn_sees_attention and not r.parallel.ffn_sees_attention   # the missing edge


def test_serial_vs_parallel_bad_input():
    with pytest.raises(ValueError, match="eps"):
        serial_vs_parallel((1, 2), 0)
    with pytest.raises(ValueError, match="x: needs at least 2"):
        serial_vs_parallel((1,))


def test_rmsnorm_vs_layernorm_on_3_4():
    r = norm_comparison((3, 4))
    assert r.rmsnorm == pytest.approx([0.8485, 1.1314], abs=5e-5)
    assert r.rmsnorm == pytest.approx([3 / math.sqrt(12.5), 4 / math.sqrt(12.5)])
    assert r.layernorm == pytest.approx([-1, 1])
    assert r.layernorm_mean == pytest.approx(0) and r.rmsnorm_mean > 0.9   # RMSNorm does not center


def test_rope_scores_depend_only_on_offset():
    a, b = rope_scores(30.0, ((0, 1), (2, 3)))
    assert a.score == pytest.approx(0.8660, abs=5e-5) and b.score == pytest.approx(a.score, abs=1e-6)
    assert a.score == pytest.approx(math.cos(math.radians(30)), abs=1e-6)
    (c,) = rope_scores(45.0, ((1, 4),), q=(1, 0), k=(0, 1))
    assert c.score == pytest.approx(math.cos(math.radians(135) + math.pi / 2), abs=1e-6)   # k starts at 90 deg
    grid = rope_score_grid(30.0, 6)
    for i in range(5):
        assert grid[i][i + 1] == pytest.approx(grid[0][1], abs=1e-6)


def test_zloss_shift_invariance():
    a, b = zloss((0, 0)), zloss((10, 10))
    assert a.probs == b.probs == [0.5, 0.5]
    assert a.log_z == pytest.approx(0.6931, abs=5e-5) and b.log_z == pytest.approx(10.6931, abs=5e-5)
    assert b.log_z - a.log_z == pytest.approx(10)
    assert zloss((0, 0), coeff=1e-4).z_loss == pytest.approx(1e-4 * math.log(2) ** 2)
    assert math.isfinite(zloss((1000.0, 1000.0)).log_z)                  # computed stably


def test_softcap_bounds_and_mask_order():
    c = softcap_curve(30.0, -300, 300, 7)
    assert all(abs(v) < 30 for v in c["capped"]) and c["slope"][3] == pytest.approx(1)
    r = mask_order((2.0, 1.0, 3.0), (False, False, True), 5.0)
    assert r.cap_then_mask[2] == 0.0 and r.mask_then_cap[2] > 0
    leak = math.exp(-5) / (math.exp(5 * math.tanh(2 / 5)) + math.exp(5 * math.tanh(1 / 5)) + math.exp(-5))
    assert r.mask_then_cap[2] == pytest.approx(leak)
    assert r.engine_future_weight == 0.0          # the engine caps first, then masks
    with pytest.raises(ValueError, match="masked: 1 flags for 3 scores"):
        mask_order((1, 2, 3), (True,))


def test_tying_shared_parameter_vs_clone():
    r = shared_vs_clone(5, 3)
    assert r["shared"].unique_params == 15 and r["clone"].unique_params == 30
    assert r["shared"].same_object and not r["clone"].same_object
    assert r["shared"].equal_before and r["clone"].equal_before
    assert r["shared"].max_diff_after == 0 and r["clone"].max_diff_after > 0


def test_handout_nanogpt_tied_vs_untied():
    r = handout_tying()
    assert r["tied"] == {"closed_form": 1872, "built": 1872}
    assert r["untied"] == {"closed_form": 1932, "built": 1932}


@pytest.mark.parametrize("tied", [True, False])
def test_absent_token_gets_p_times_h(tied):
    r = absent_token_gradient((0, 2), 1, tied=tied)
    assert r.absent == [3, 4]
    assert r.max_error < 1e-12
    for j, row in zip(r.absent, r.head_grad[3:]):
        assert row == pytest.approx([r.probs[j] * h for h in r.hidden], abs=1e-12)
        assert any(abs(v) > 1e-6 for v in row)
    assert (r.embedding_absent_grad > 0) == tied     # only a tied table lets the absent token's embedding learn


def test_absent_token_bad_ids():
    with pytest.raises(ValueError, match=r"in \[0, 4\]"):
        absent_token_gradient((0, 9), 1)


def test_tying_savings_at_32000_768():
    s = tying_savings(32000, 768)
    assert s.params == 24_576_000
    assert s.weight_bytes / MIB == pytest.approx(46.875)
    assert s.bytes_per_param_training == 12 and s.training_bytes / MIB == pytest.approx(281.25)
    assert s.master_bytes / MIB == pytest.approx(93.75)
    with pytest.raises(ValueError, match="weight_dtype"):
        tying_savings(weight_dtype="int3")


def test_kv_cache_mha_gqa_mqa():
    kinds = {v.kind: v.bytes for v in kv_cache_variants(32, 8192, 32, 128)}
    assert kinds == {"MHA": 4 * GIB, "GQA-8": 1 * GIB, "MQA": 128 * MIB}
    assert kinds["MHA"] == 2 * 32 * 8192 * 32 * 128 * 2
    with pytest.raises(ConfigError, match="n_kv_heads"):
        kv_cache_variants(kv_heads=(5,))


def test_flexible_head_width_builds_and_runs():
    r = flexible_heads(10, 3, 4)
    assert not r.divides and r.attn_width == 12
    assert r.q_proj_shape == (12, 10) and r.o_proj_shape == (10, 12)
    assert r.projection_params == 4 * 10 * 12 and r.logits_shape == (1, 5, 16) and r.finite


def test_depth_vs_width_equal_blocks_different_costs():
    r = depth_vs_width((12, 768), (48, 384))
    a, b = r.shapes
    assert a.block_params == b.block_params == 12 * 12 * 768 ** 2
    assert r.kv_ratio == 2.0 and r.depth_ratio == 4.0
    assert a.total_params != b.total_params          # embeddings scale with D


def test_microgpt_hand_table():
    t = microgpt_table()
    assert [r.count for r in t.rows] == [448, 256, 448, 256, 256, 256, 256, 1024, 1024]
    assert t.hand_total == t.engine_total == t.built_total == 4224
    doubled = microgpt_table(d_model=32)
    assert doubled.hand_total == doubled.engine_total == 2 * 28 * 32 + 16 * 32 + 12 * 32 * 32
