"""Figure and table builders, called directly (AppTest cannot read Plotly figures)."""
import math

import pytest

from app import charts, tables
from app.charts import activations as activation_charts
from app.charts import budgets as budget_charts
from app.charts import compare as compare_charts
from app.charts import design as design_charts
from app.budget_view import kv_variants, token_grid
from engine.activation_grid import activation_curves, gated_surface
from engine.budget.devices import DEVICE_PROFILES, roofline
from engine.budget.flops import flops_budget
from engine.budget.memory import POLICIES, POLICY_DTYPE, kv_cache_bytes, memory_budget
from engine.budget.params import COMPONENTS, count_params
from engine.presets import PRESETS
from engine.units import fmt_count_short

LLAMA = PRESETS["llama-3-8b"].config


def test_colors_cover_every_component():
    assert set(charts.COMPONENT_GROUP) == set(COMPONENTS)
    assert set(charts.COMPONENT_GROUP.values()) <= set(charts.COLORS)


def test_treemap_sums_to_total():
    pc = count_params(LLAMA)
    fig = design_charts.params_treemap(pc)
    sb = fig.data[0]
    roots = [v for v, p in zip(sb.values, sb.parents) if p == ""]
    assert sum(roots) == pc.total
    assert "8,030,261,248" in fig.layout.title.text
    assert sb.marker.colors[list(sb.ids).index("ffn")] == charts.COLORS["ffn"]


def test_params_table_has_separators_and_total():
    df = tables.params_table(count_params(PRESETS["gpt2"].config))
    assert df.iloc[-1]["parameters"] == "124,439,808"
    assert "output head" not in set(df["component"])      # tied: zero rows are left out
    assert not df["component"].str.contains("multi-token").any()


def test_params_table_puts_deepseek_v3_mtp_after_the_total():
    df = tables.params_table(count_params(PRESETS["deepseek-v3"].config))
    total, mtp = df.iloc[-2], df.iloc[-1]
    assert (total["component"], total["parameters"]) == ("total", "671,026,404,352")
    # DeepSeek-V3's one MTP module: 11,610,067,968 (engine/budget/mtp.py, held against transformers there)
    assert (mtp["component"], mtp["parameters"]) == ("multi-token prediction (not in the total)", "11,610,067,968")
    assert mtp["share"] == f"+{11_610_067_968 / 671_026_404_352:.2%}"


def test_memory_figure_stacks_engine_terms():
    train = {p: memory_budget(LLAMA, 1, 2048, POLICY_DTYPE[p], p) for p in POLICIES}
    infer = memory_budget(LLAMA, 1, 2048, "bf16", "bf16")
    fig = budget_charts.memory_figure(train, infer, "inference (bf16)")
    assert fig.layout.yaxis.title.text == "memory (GiB)"
    weights = next(t for t in fig.data if t.name == "weights")
    assert weights.y[0] * 2**30 == pytest.approx(train["fp32"].weights_bytes)
    assert list(weights.x) == list(POLICIES) + ["inference (bf16)"]
    kv = next(t for t in fig.data if t.name == "KV cache")
    assert kv.y[-1] * 2**30 == pytest.approx(kv_cache_bytes(LLAMA, 1, 2048))


def test_byte_unit():
    assert budget_charts.byte_unit(1023) == (1, "B")
    assert budget_charts.byte_unit(2**30) == (2**30, "GiB")


def test_kv_vs_context_figure_variants():
    variants = kv_variants(LLAMA)
    assert any(k.startswith("MHA") for k in variants) and any(k.startswith("MQA") for k in variants)
    assert list(variants.values())[0] == LLAMA and len(set(variants.values())) == len(variants)
    grid = token_grid(LLAMA.context_length)
    assert grid[0] == 1 and grid[-1] == LLAMA.context_length
    series = {k: [kv_cache_bytes(v, 1, t) for t in grid] for k, v in variants.items()}
    fig = budget_charts.kv_vs_context_figure(list(grid), series, next(iter(variants)))
    assert fig.layout.xaxis.title.text == "context length (tokens)"
    mha = next(t for t in fig.data if t.name.startswith("MHA"))
    assert mha.y[-1] == pytest.approx(4.0)                  # 32 layers, 8192 tokens, 32 x 128, bf16: 4 GiB


def test_flops_and_roofline_figures():
    fb = flops_budget(LLAMA, 1, 2048)
    fig = budget_charts.flops_figure(fb)
    assert sum(t.y[0] for t in fig.data) == fb.train_flops
    rules = budget_charts.flops_rules_figure(fb)
    assert list(rules.data[0].y) == [fb.flops_per_token, fb.six_n_per_token, fb.palm_per_token]
    points = roofline(LLAMA, "H100", 1, 2048)
    roof = budget_charts.roofline_figure(DEVICE_PROFILES["H100"], points, "bf16")
    assert roof.layout.xaxis.type == "log" and "FLOP per byte" in roof.layout.xaxis.title.text
    assert roof.layout.xaxis.tickformat == ",~g"                               # 1,000 and 10,000, not 1000 and 10k
    assert {t.name for t in roof.data} >= {"prefill: compute-bound", "decode: memory-bound"}


def test_compare_bars_and_table():
    configs = {"a": PRESETS["gpt2"].config, "b": LLAMA}
    fig = compare_charts.compare_bars("P", list(configs), {"total": [1, 2]}, "count")
    assert [t.name for t in fig.data] == ["a", "b"] and fig.layout.barmode == "group"
    with pytest.raises(ValueError, match="kind"):
        compare_charts.compare_bars("P", ["a"], {"x": [1]}, "watts")
    df, differing = tables.compare_table(configs)
    assert "d_model" in differing and "dropout" not in differing
    assert df.loc["d_model", "b"] == "4,096" and df.loc["n_kv_heads", "a"] == "null"
    assert df.loc["rope_base", "b"] == "500,000.0" and df.loc["norm_eps", "b"] == "1e-05"
    assert df.loc["bias", "a"] == "true" and df.loc["bias", "b"] == "false"       # as YAML writes them
    log = compare_charts.compare_bars("M", ["a", "b"], {"kv": [2**20, 2**30]}, "bytes", log=True)
    assert log.layout.xaxis.type == "log" and log.layout.xaxis.title.text == "memory, log scale"
    assert list(log.layout.xaxis.ticktext) == ["1 MiB", "4 MiB", "16 MiB", "64 MiB", "256 MiB", "1 GiB"]  # every 4x
    assert list(log.data[0].text) == ["1.00 MiB"] and list(log.data[0].x) == [2**20]           # bytes on a log axis
    counts = compare_charts.compare_bars("P", ["a", "b"], {"total": [124_439_808, 8_030_261_248]}, "count", log=True)
    assert list(counts.layout.xaxis.ticktext) == ["100M", "1B", "10B"]       # as people say them, not 10G
    assert fig.layout.xaxis.tickformat == ",d"                                # linear counts: 8,000,000,000
    assert list(counts.data[1].text) == ["8.03B"] and list(counts.data[1].customdata) == ["8,030,261,248"]
    assert counts.layout.xaxis.range[1] > math.log10(8_030_261_248)         # room for the label after the bar


def test_compare_bars_lie_down_so_their_labels_keep_the_chart_font():
    """Four pins x three metrics on a half-width chart: upright bars were ~40 px wide and plotly shrank their
    labels to fit (~6 px) or they were turned on end. Lying down, a label follows its bar's end at full size;
    the chart grows a bar's thickness per bar."""
    four = compare_charts.compare_bars("M", list("abcd"), {k: [2**30, 2**31, 2**32, 2**33] for k in "xyz"}, "bytes")
    assert {t.orientation for t in four.data} == {"h"} and {t.constraintext for t in four.data} == {"none"}
    assert {t.textangle for t in four.data} == {None} and four.layout.xaxis.title.text == "memory (GiB)"
    assert four.layout.height >= 12 * compare_charts.BAR_PX
    assert four.layout.xaxis.range[1] > 8                                     # GiB: the longest bar fits
    assert list(four.data[3].x) == [8, 8, 8] and list(four.data[3].text) == ["8.00 GiB"] * 3


def test_log_ticks_in_the_units_people_say():
    tib = 2**40
    assert compare_charts.log_ticks("bytes", [36 * 2**20, 1.2 * tib]) == (
        [2**25, 2**30, 2**35, 2**40], ["32 MiB", "1 GiB", "32 GiB", "1 TiB"])          # never 0.0001 TiB
    assert compare_charts.log_ticks("bytes", [2**30, 16 * 2**30])[1] == ["1 GiB", "2 GiB", "4 GiB", "8 GiB", "16 GiB"]
    assert compare_charts.log_ticks("bytes", [100, 2**50])[1] == ["1 B", "1 KiB", "1 MiB", "1 GiB", "1 TiB", "1 PiB"]
    assert compare_charts.log_ticks("flops", [7e8, 5.1e10])[1] == ["100 MFLOP", "1 GFLOP", "10 GFLOP", "100 GFLOP"]


def test_fmt_count_short():
    assert [fmt_count_short(n) for n in (999, 1_000, 1_500_000, 7e9, 70_553_706_496, 2e12)] == \
        ["999", "1K", "1.5M", "7B", "70.6B", "2T"]


def test_activation_and_stats_figures():
    curves = activation_curves(("relu", "swiglu"), -2, 2, 5)
    fig = activation_charts.values_and_slopes_figure(curves, "t")
    assert len(fig.data) == 4 and fig.layout.hovermode == "x unified"
    heat = activation_charts.gated_surface_figure(gated_surface("geglu", -1, 1, 3))
    assert heat.data[0].zmid == 0
    assert activation_charts.residual_rms_figure([1.0, 2.0]).layout.xaxis.title.text.startswith("layer")
    ent = activation_charts.entropy_figure([[0.1, 0.2]], [0.7], 64)
    assert ent.layout.coloraxis is not None and ent.data[0].colorbar.title.text == "nats"
    assert (ent.data[0].zmin, ent.data[0].zmax) == (0, math.log(64))   # fixed 0..ln T, not the data's spread
    assert "layer 1, head 0" in activation_charts.attention_map_figure([[1.0, 0.0], [0.5, 0.5]], 1, 0).layout.title.text
