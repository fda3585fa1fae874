"""engine.sweep: closed-form sweeps held against count_params of each config, the KV-cache formula written out,
the declarations' choices, and the equal-parameter tolerance computed by hand."""
from __future__ import annotations

import pytest

from engine.budget.params import count_params
from engine.config import FIELDS, ConfigError
from engine.presets import get_preset
from engine.sweep import (KNOBS, METRICS, SweepSettings, d_ff_step, default_values, pareto_front, run_sweep,
                          value_label)

LLAMA3 = get_preset("llama-3-8b").config
GPT2 = get_preset("gpt2").config


def test_kv_heads_rows_match_params_and_the_kv_formula():
    s = run_sweep(LLAMA3, {"n_kv_heads": [1, 2, 4, 8, 32]})
    assert [p.values["n_kv_heads"] for p in s.points] == [1, 2, 4, 8, 32]
    for p in s.points:
        kv = p.values["n_kv_heads"]
        assert p.metrics["total_params"] == count_params(LLAMA3.replace(n_kv_heads=kv)).total
        # 2 (K, V) * 32 layers * 8192 tokens * kv heads * 128 head_dim * 2 bytes (bf16)
        assert p.metrics["kv_cache_bytes"] == 2 * 32 * 8192 * kv * 128 * 2
    assert s.points[3].metrics["total_params"] == 8_030_261_248          # the preset itself (GQA-8)
    assert s.points[3].metrics["kv_cache_bytes"] == 1 << 30             # DESIGN: GQA-8 1 GiB, MHA 4 GiB, MQA 128 MiB
    assert s.points[4].metrics["kv_cache_bytes"] == 4 << 30 and s.points[0].metrics["kv_cache_bytes"] == 128 << 20


def test_every_metric_is_present_and_weights_are_params_times_bytes():
    s = run_sweep(GPT2, {"tie_embeddings": None}, SweepSettings(dtype="fp32", context=256))
    tied, untied = (p.metrics for p in s.points[::-1])
    assert set(tied) == set(METRICS)
    assert tied["total_params"] == 124_439_808
    assert untied["total_params"] - tied["total_params"] == 50257 * 768           # what tying saves
    assert tied["weights_bytes"] == 4 * 124_439_808
    assert tied["active_params"] == tied["total_params"]                           # dense FFN


def test_invalid_points_are_listed_with_the_field_named():
    s = run_sweep(LLAMA3, {"n_kv_heads": [8, 5, 3]})
    assert [p.valid for p in s.points] == [True, False, False]
    assert s.points[1].problems == ["n_kv_heads: 5 does not divide n_heads=32"]
    row = s.rows()[2]
    assert row["valid"] is False and row["total_params"] is None and row["problems"][0].startswith("n_kv_heads:")


def test_choice_knob_defaults_to_every_declared_choice_and_bools_to_both():
    assert default_values(GPT2, "ffn") == list(FIELDS["ffn"].choices)
    assert default_values(GPT2, "norm_placement") == ["pre", "post", "sandwich", "post_branch"]
    assert default_values(GPT2, "norm_placement") == list(FIELDS["norm_placement"].choices)
    assert default_values(GPT2, "qk_norm") == [False, True]
    assert default_values(GPT2, "head_bias") == [False, True]
    assert default_values(GPT2, "norm_bias") == [None, False, True]        # optional bool: null follows the norm
    assert [value_label("norm_bias", v) for v in default_values(GPT2, "norm_bias")] == ["follow norm", "off", "on"]


def test_numeric_grids_fit_the_knob():
    assert default_values(LLAMA3, "n_kv_heads") == [1, 2, 4, 8, 16, 32]          # divisors of 32
    assert default_values(GPT2, "n_kv_heads") == [1, 2, 3, 4, 6, 12]
    windows = default_values(LLAMA3, "attn_window")
    assert windows[-1] is None and windows[:-1] == [32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert default_values(GPT2, "n_layers") == [3, 6, 12, 24, 48]
    assert default_values(GPT2, "global_every") == [None, 2, 4, 8]
    assert all(p.valid for p in run_sweep(LLAMA3, {"n_kv_heads": None}).points)


def test_window_sweep_kv_is_held_tokens():
    s = run_sweep(LLAMA3, {"attn_window": [1024, None]}, SweepSettings(context=4096))
    small, full = (p.metrics for p in s.points)
    assert small["kv_cache_bytes"] * 4 == full["kv_cache_bytes"]               # 1024 of 4096 tokens held
    assert small["flops_per_token"] < full["flops_per_token"]
    assert small["total_params"] == full["total_params"]


def test_two_knobs_give_the_product():
    # gpt2 leaves norm_bias null (follow the norm), so rmsnorm is valid there; an explicit norm_bias: true is not
    s = run_sweep(GPT2.replace(norm_bias=True), {"n_kv_heads": [1, 12], "norm": ["layernorm", "rmsnorm"]})
    assert [tuple(p.values.values()) for p in s.points] == [(1, "layernorm"), (1, "rmsnorm"), (12, "layernorm"),
                                                          (12, "rmsnorm")]
    assert [p.valid for p in s.points] == [True, False, True, False]
    assert s.points[1].problems == ["norm_bias: rmsnorm has no bias; set norm_bias: false"]
    followed = run_sweep(GPT2, {"n_kv_heads": [1, 12], "norm": ["layernorm", "rmsnorm"]})
    assert all(p.valid for p in followed.points)
    ln, rms = followed.points[2].metrics, followed.points[3].metrics                 # MHA, layernorm vs rmsnorm
    assert ln["total_params"] == 124_439_808
    assert ln["total_params"] - rms["total_params"] == (2 * 12 + 1) * 768          # the 25 LayerNorm betas dropped


@pytest.mark.parametrize("base", [LLAMA3, GPT2])
def test_equal_params_by_d_ff_within_one_multiple_of_step(base):
    s = run_sweep(base, {"ffn": None}, hold="d_ff")
    target = count_params(base).total
    assert s.target == target
    for p in s.points:
        d, L, m = p.config.d_model, p.config.n_layers, p.config.ffn_multiple_of
        per_unit = L * ((3 if p.config.gated else 2) * d + (2 if p.config.gated else 1) * p.config.bias)
        assert d_ff_step(p.config) == per_unit * m                                 # hand-derived step
        assert abs(p.metrics["total_params"] - target) <= per_unit * m
        assert p.config.d_ff % m == 0 and p.solved == {"d_ff": p.config.d_ff}


def test_equal_params_gated_vs_dense_on_llama3():
    s = run_sweep(LLAMA3, {"ffn": ["swiglu", "gelu"]}, hold="d_ff")
    assert s.points[0].config.d_ff == 14336 and s.points[1].config.d_ff == 14336 * 3 // 2   # 3 vs 2 matrices


def test_equal_params_by_d_model_keeps_non_embedding_close():
    s = run_sweep(GPT2, {"n_layers": [6, 12, 24]}, hold="d_model", hold_target="non_embedding")
    target = count_params(GPT2).non_embedding
    assert s.points[1].config.d_model == 768 and s.points[1].metrics["non_embedding_params"] == target
    for p in s.points:
        step = 2 * p.config.n_heads                                                # the widths searched
        below = count_params(p.config.replace(d_model=p.config.d_model - step)).non_embedding
        above = count_params(p.config.replace(d_model=p.config.d_model + step)).non_embedding
        gap = abs(p.metrics["non_embedding_params"] - target)
        assert gap <= abs(below - target) and gap <= abs(above - target)          # the nearest width
    assert s.points[0].config.d_model > 768 > s.points[2].config.d_model


def test_bad_sweeps_name_the_setting():
    with pytest.raises(ConfigError, match="knob: 'n_kv_head' is not a config field.*n_kv_heads"):
        run_sweep(GPT2, {"n_kv_head": None})
    with pytest.raises(ConfigError, match="hold: cannot solve for d_ff while sweeping it"):
        run_sweep(GPT2, {"d_ff": None}, hold="d_ff")
    with pytest.raises(ConfigError, match="values: 30 x 30 = 900 points"):
        run_sweep(GPT2, {"n_layers": list(range(1, 31)), "d_model": list(range(1, 31))})
    with pytest.raises(ConfigError, match="context: 0 is not an integer >= 1"):
        SweepSettings(context=0)


def test_learned_positions_beyond_context_is_an_invalid_point():
    s = run_sweep(GPT2, {"context_length": [512, 2048]}, SweepSettings(context=1024))
    assert not s.points[0].valid and s.points[0].problems[0].startswith("context: 1024 exceeds context_length=512")
    assert s.points[1].valid


def test_pareto_front_keeps_the_points_nothing_beats_on_both():
    rows = [{"kv": 1, "loss": 3.0}, {"kv": 2, "loss": 2.5}, {"kv": 4, "loss": 2.6}, {"kv": 8, "loss": 2.0},
            {"kv": 8, "loss": 2.2}, {"kv": None, "loss": 1.0}]
    assert pareto_front(rows, "kv", "loss") == [0, 1, 3]          # 4 loses to 2; (8, 2.2) to (8, 2.0); None skipped
    s = run_sweep(LLAMA3, {"n_kv_heads": [1, 8, 32]}).rows()
    assert pareto_front(s, "kv_cache_bytes", "total_params") == [0]   # MQA is smallest on both closed forms


def test_ready_sweeps_reproduce_the_lecture_facts():
    from engine.sweep.ready import READY, run_ready
    gating = run_ready(GPT2, "gating")
    assert [p.config.d_ff for p in gating.points] == [3072, 2048]          # DESIGN: both 4,718,592 FFN matrix params
    depth = run_ready(GPT2, "depth")
    widths = {p.values["n_layers"]: p.config.d_model for p in depth.points}
    assert widths[12] == 768 and widths[48] == 384 and widths[3] == 1536   # 12*L*D^2 blocks: 4x depth, 1/2 width
    gqa = run_ready(LLAMA3, "gqa")
    assert [p.metrics["kv_cache_bytes"] for p in gqa.points][::5] == [128 << 20, 4 << 30]
    assert set(READY) == {"gqa", "gating", "depth", "window"}
    with pytest.raises(ValueError, match="sweep: 'x' is not one of gqa"):
        run_ready(GPT2, "x")


def test_moe_sweep_active_params_and_every_default_grid():
    from engine.presets import PRESETS
    mixtral = get_preset("mixtral-8x7b").config
    s = run_sweep(mixtral, {"experts_per_token": [1, 2, 8]})
    total = [p.metrics["total_params"] for p in s.points]
    active = [p.metrics["active_params"] for p in s.points]
    assert total == [46_702_792_704] * 3 and active[1] == 12_879_925_248           # DESIGN: Mixtral 2 of 8
    assert active[2] == total[2] and active[0] < active[1]                       # all 8 experts: active == total
    held = run_sweep(mixtral, {"n_layers": [16]}, hold="d_ff").points[0]
    assert held.problems[0].startswith("d_ff: no dense FFN in this config uses d_ff")
    for name, preset in PRESETS.items():                                         # a grid for every knob of every preset
        for knob in KNOBS:
            assert default_values(preset.config, knob), (name, knob)
