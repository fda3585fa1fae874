"""app.compare_view: the Compare page's pins and bar values without Streamlit."""
from app.compare_view import MAX_PINS, add_pin, compare_metrics
from engine.presets import PRESETS

GPT2, MICRO = PRESETS["gpt2"].config, PRESETS["microgpt"].config


def test_pins_get_unique_labels_once_each_and_at_most_four():
    pins = [("gpt2", GPT2)]
    assert add_pin(pins, "gpt2", MICRO) == "" and pins[-1] == ("gpt2 (2)", MICRO)
    assert add_pin(pins, "again", MICRO) == "again is already pinned." and len(pins) == 2
    add_pin(pins, "gpt2", MICRO.replace(n_layers=2))
    assert pins[-1][0] == "gpt2 (3)"
    add_pin(pins, "x", MICRO.replace(n_layers=3))
    assert len(pins) == MAX_PINS == 4
    assert add_pin(pins, "y", MICRO.replace(n_layers=4)) == "At most 4 pins: unpin one first." and len(pins) == 4


def test_compare_metrics_match_the_reference_facts():
    v = compare_metrics({"a": GPT2, "b": MICRO})
    assert v["params"]["total"][0] == 124_439_808                  # GPT-2 small, Hugging Face count
    assert v["memory"]["bf16 weights"][0] == 2 * 124_439_808
    assert v["memory"]["KV cache"][0] == 2 * 12 * 1024 * 12 * 64 * 2   # 2 x L x T x kv_heads x head_dim x bf16
    assert v["flops"]["6N rule"] == [6 * n for n in v["params"]["non-embedding"]]   # N = non-embedding params
    assert v["memory"]["training step"][0] > 16 * 124_439_808   # mixed-bf16 AdamW: 16 bytes/param + activations
    assert all(len(series) == 2 for chart in v.values() for series in chart.values())
