"""bench/mutation_score.py: the score counts only checked mutants; unchecked ones are reported apart."""
from bench.mutation_score import module_of, tally


def test_module_of_functions_and_methods():
    assert module_of("engine.budget.params.x_count_params__mutmut_3") == "engine.budget.params"
    assert module_of("engine.layers.attention.x\u01c1Attention\u01c1forward__mutmut_12") == "engine.layers.attention"


def test_tally_separates_detected_missed_and_pending():
    lines = ["    engine.a.x_f__mutmut_1: killed", "    engine.a.x_f__mutmut_2: timeout",
             "    engine.a.x_f__mutmut_3: survived", "    engine.a.x_g__mutmut_1: no tests",
             "    engine.b.x_h__mutmut_1: not checked", "    engine.b.x_h__mutmut_2: skipped",
             "    engine.b.x_h__mutmut_3: caught by type check", ""]
    by_module, missed = tally(lines)
    assert dict(by_module["engine.a"]) == {"detected": 2, "missed": 2}
    assert dict(by_module["engine.b"]) == {"pending": 1, "detected": 1}
    assert missed == ["engine.a.x_f__mutmut_3: survived", "engine.a.x_g__mutmut_1: no tests"]
