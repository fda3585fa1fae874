"""The headline FLOPs/token counts what a causal, windowed kernel computes: Mistral-7B's 4,096 window, the metric
row, Budgets and the `flops` CLI lead with it; the full square stays available and labelled."""
import json

from app.charts import budgets as budget_charts
from engine.budget.flops import flops_budget, gap_note, headline_flops, matmul_params
from engine.cli import main
from engine.presets import get_preset

MISTRAL = get_preset("mistral-7b").config


def causal_attention_per_token(L: int, A: int, T: int, w: int | None) -> float:
    """Training attention FLOPs per token, written out: 3 (fwd + 2 x bwd) x 2 products x 2 FLOPs x A per visible
    pair; query i sees min(i + 1, w) keys."""
    pairs = sum(min(i + 1, w or T) for i in range(T))
    return 3 * 4 * A * L * pairs / T


def test_mistral_headline_uses_its_4096_window():
    T = MISTRAL.context_length
    assert (T, MISTRAL.attn_window) == (32_768, 4_096)
    h = headline_flops(MISTRAL, 1, T)
    expected = 6 * matmul_params(MISTRAL) + causal_attention_per_token(32, 4096, T, 4096)
    assert h.causal and h.flops_per_token == expected
    # the window makes it cheaper per token than Llama-3-8B (same widths, 8,192 context, no window)
    llama = get_preset("llama-3-8b").config
    assert h.flops_per_token < headline_flops(llama, 1, llama.context_length).flops_per_token
    # the full-square convention, still available, charges 32,768 keys to every query: ~94.2 GFLOP
    assert round(flops_budget(MISTRAL, 1, T).flops_per_token / 1e9, 1) == 94.2


def test_headline_halves_full_attention_causally():
    gpt2 = get_preset("gpt2").config
    h = headline_flops(gpt2, 1, 1024)
    assert h.flops_per_token == 6 * matmul_params(gpt2) + causal_attention_per_token(12, 768, 1024, None)


def test_gap_note_names_the_three_conventions():
    note = gap_note(MISTRAL, MISTRAL.context_length)
    assert "48.70 GFLOP" in note and "Kaplan's 6N = 41.88 GFLOP" in note and "94.99 GFLOP" in note
    assert "causal and windowed" in note and "94.20 GFLOP" in note


def test_rules_chart_shows_both_counts_labelled():
    T = 2048
    h, full = headline_flops(MISTRAL, 1, T), flops_budget(MISTRAL, 1, T)
    fig = budget_charts.flops_rules_figure(h, full)
    assert list(fig.data[0].x) == ["counted: causal/window pairs", "counted: full T×T square (FlopCounterMode)",
                                   "Kaplan 6N (non-embedding N)", "PaLM 6N + 12·L·H·Q·T (all N)"]
    assert list(fig.data[0].y) == [h.flops_per_token, full.flops_per_token, h.six_n_per_token, h.palm_per_token]


def test_flops_cli_leads_with_the_headline(capsys):
    assert main(["flops", "--preset", "mistral-7b", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["causal"] is True and data["flops_per_token"] == headline_flops(MISTRAL, 1, 32_768).flops_per_token
    assert main(["flops", "--preset", "mistral-7b", "--full-square", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["causal"] is False and data["flops_per_token"] == flops_budget(MISTRAL, 1, 32_768).flops_per_token
    assert main(["flops", "--preset", "mistral-7b"]) == 0
    out = capsys.readouterr().out
    assert "causal/window query-key pairs" in out and "PaLM rule" in out


def test_metric_row_and_budgets_lead_with_the_headline(new_app):
    at = new_app("pages/budgets.py", preset="mistral-7b")
    at.run()
    assert not at.exception
    metric = next(m for m in at.metric if m.label == "FLOPs / token")
    assert metric.value == "48.70 GFLOP" and at.toggle(key="b_causal").value is True
    assert any("PaLM rule" in c.value for c in at.caption)


def test_compare_bars_use_the_headline():
    from app.compare_view import compare_metrics
    v = compare_metrics({"mistral": MISTRAL})
    assert v["flops"]["counted"] == [headline_flops(MISTRAL, 1, 32_768).flops_per_token]


def test_gap_note_attention_figures_are_the_hand_counts():
    """gpt2 at T = 1,024: causal attention 3 x 4 x 768 x 12 x 524,800 pairs / 1,024 tokens per token, the full
    square 3 x 4 x 768 x 12 x 1,024, about twice as much; the sentence carries both and the ratio."""
    from engine.units import fmt_flops
    gpt2 = get_preset("gpt2").config
    causal, full = causal_attention_per_token(12, 768, 1024, None), 3 * 4 * 768 * 12 * 1024
    note = gap_note(gpt2, 1024)
    assert f"plus {fmt_flops(causal)} of attention over the query-key pairs a causal kernel" in note
    assert f"full T×T square ({fmt_flops(full)}, {full / causal:.1f}× that)" in note
    assert (fmt_flops(causal), fmt_flops(full)) == ("56.68 MFLOP", "113.25 MFLOP")
    assert "at T = 1,024; the PaLM rule" in note and "indexer" not in note and "windowed" not in note
