"""The layout knob attention_layers (engine/sweep/grid.py LAYOUT_KNOBS): how many of the mixer layers are softmax
attention, the rest Gated DeltaNet, swept with the existing machinery; its points held against the budgets of
the config with_attention_layers builds, against Qwen3-Next's published figures, and on the Trade-offs page."""
import pytest

from app.sweep_view import spec_from_params
from engine.budget.memory import kv_cache_bytes, state_bytes
from engine.budget.params import count_params
from engine.config import ConfigError
from engine.layers.layer_map import with_attention_layers
from engine.presets import PRESETS
from engine.sweep import KNOBS, SweepSettings, default_values, parse_values, run_sweep

QWEN = PRESETS["qwen3-next-80b-a3b"].config
T = 262_144


def test_grid_and_parsing():
    assert "attention_layers" in KNOBS
    assert default_values(QWEN, "attention_layers") == [0, 1, 6, 12, 24, 48]
    assert default_values(PRESETS["gpt2"].config, "attention_layers") == [0, 1, 3, 6, 12]
    assert parse_values("attention_layers", ["0", "12"]) == [0, 12]
    with pytest.raises(ValueError, match=r"recurrent: 'full' is not a recurrent mixer kind \(gdn, .*mamba"):
        with_attention_layers(QWEN, 12, "full")
    with pytest.raises(ConfigError, match="attention_layers: 'x' is not a whole number"):
        parse_values("attention_layers", ["x"])


def test_points_are_the_rewritten_configs():
    s = run_sweep(QWEN, {"attention_layers": None}, SweepSettings(context=T))
    rows = {r["attention_layers"]: r for r in s.rows()}
    assert rows[12]["total_params"] == 79_674_391_296 and rows[12]["active_params"] == 3_874_929_408   # the preset
    assert rows[12]["kv_cache_bytes"] == 24_576 * T and rows[48]["kv_cache_bytes"] == 98_304 * T
    assert rows[0]["kv_cache_bytes"] == 0 and rows[48]["state_bytes"] == 0
    for k, r in rows.items():
        cfg = with_attention_layers(QWEN, k)
        parts = state_bytes(cfg, 1, "bf16")
        assert r["state_bytes"] == parts["conv"] + parts["recurrent"], k
        assert r["total_params"] == count_params(cfg).total and r["kv_cache_bytes"] == kv_cache_bytes(cfg, 1, T), k
    # per attention layer, KV grows by 2 x 2 KV heads x 256 x 2 B per token and the state shrinks by one GDN layer's
    assert rows[24]["kv_cache_bytes"] - rows[12]["kv_cache_bytes"] == 12 * 2 * 2 * 256 * 2 * T
    assert (rows[12]["state_bytes"] - rows[24]["state_bytes"]) * 36 == rows[12]["state_bytes"] * 12


def test_out_of_range_is_a_point_naming_the_knob():
    s = run_sweep(QWEN, {"attention_layers": [49]})
    assert not s.points[0].valid and s.points[0].problems[0].startswith("attention_layers: 49 is not between 0")


def test_url_accepts_the_knob():
    spec, problems = spec_from_params({"knob": "attention_layers", "values": "0,12,48"})
    assert not problems and spec.knob == "attention_layers"


def test_tradeoffs_page(new_app):
    at = new_app("pages/tradeoffs.py", preset="qwen3-next-80b-a3b", knob="attention_layers", values="0,12,48",
                 context=str(T))
    at.run(timeout=120)
    assert not at.exception and not at.warning
    rows = at.dataframe[-1].value.to_dict("records")
    assert [r["attention_layers"] for r in rows] == ["0", "12", "48"]
    assert [r["KV cache"] for r in rows] == ["0 B", "6.00 GiB", "24.00 GiB"]
    assert [r["recurrent state"] for r in rows] == ["50.25 MiB", "37.69 MiB", "0 B"]
    assert rows[1]["total parameters"] == "79,674,391,296"


def test_the_others_keep_the_configs_recurrent_kind():
    """Jamba's 4 attention layers of 32 are its own layout again; its other layers stay Mamba-1."""
    jamba = PRESETS["jamba-v0.1"].config
    assert with_attention_layers(jamba, 4) == jamba
    rows = {r["attention_layers"]: r for r in run_sweep(jamba, {"attention_layers": [0, 4]}).rows()}
    assert rows[4]["total_params"] == count_params(jamba).total
    assert rows[0]["state_bytes"] * 28 == rows[4]["state_bytes"] * 32   # 32 Mamba-1 layers against 28
