"""app.budget_measure: the Budgets page's Measure flow without Streamlit (counted, skipped, refused)."""
from app import budget_measure
from engine.budget.activations import activation_estimate
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.measure.stats import CPU_PARAM_LIMIT
from engine.units import fmt_bytes, fmt_flops

TINY = ModelConfig(name="tiny", vocab_size=64, context_length=32, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2)


def test_small_model_is_counted_and_built():
    r = budget_measure.measure_budgets(TINY, 1, 8, "fp32", "sdpa", "cpu")
    assert r.skipped is None and r.refused is None
    assert set(r.measured) == {"forward_flops", "backward_flops", "activations_bytes", "kv_cache_bytes"}
    # KV cache after a decode step over 8 tokens: 2 x layers x tokens x kv_heads x head_dim x 4 bytes (fp32)
    assert r.measured["kv_cache_bytes"].measured == 2 * 2 * 8 * 2 * 4 * 4
    formats = {m.quantity: fmt for m, fmt in r.rows()}
    assert formats["forward FLOPs"] is fmt_flops and formats["KV-cache bytes"] is fmt_bytes


def test_progress_gets_one_label_per_step():
    said = []
    budget_measure.measure_budgets(TINY, 1, 4, "fp32", "sdpa", "cpu", said.append)
    assert said == ["Counting FLOPs on the meta device", "Building tiny on cpu and recording saved tensors",
                    "Filling a KV cache"]


def test_too_many_layers_skips_the_flop_count_with_the_field_and_limit(monkeypatch):
    monkeypatch.setattr(budget_measure, "MEASURE_MAX_LAYERS", 1)
    r = budget_measure.measure_budgets(TINY, 1, 4, "fp32", "sdpa", "cpu")
    assert r.skipped.startswith("n_layers: not counting FLOPs") and "2 layers (at most 1," in r.skipped
    assert set(r.measured) == {"activations_bytes", "kv_cache_bytes"}


def test_too_big_to_build_is_refused_with_its_count_and_flops_still_counted():
    big = TINY.replace(name="wide-vocab", vocab_size=16_000_000)   # > CPU_PARAM_LIMIT in the (tied) embedding alone
    total = count_params(big).total
    assert total > CPU_PARAM_LIMIT
    r = budget_measure.measure_budgets(big, 1, 4, "fp32", "sdpa", "cpu")
    assert r.refused.startswith("Not building a real model:") and f"{total:,} parameters" in r.refused
    assert list(r.measured) == ["forward_flops", "backward_flops"]


def test_measurements_run_at_the_page_batch_and_sequence():
    r = budget_measure.measure_budgets(TINY, 3, 8, "fp32", "sdpa", "cpu")
    assert r.measured["kv_cache_bytes"].measured == 3 * 2 * 2 * 8 * 2 * 4 * 4     # batch 3
    assert r.measured["activations_bytes"].estimate == activation_estimate(TINY, 3, 8, "fp32", "sdpa").total
