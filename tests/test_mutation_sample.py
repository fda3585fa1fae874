"""bench/mutation_sample.py: the stratified sampler, the Wilson interval (against Newcombe 1998's published
table), the size-weighted estimate, and the ledgers' equivalence claims."""
from __future__ import annotations

import pytest

from bench.mutation_sample import allocate, draw, equivalents, ledger_equivalents, score, wilson


def test_allocation_gives_each_module_its_floor_and_the_rest_in_proportion():
    # floors 5 (all of a), 10, 10; the other 25 split 100:300 over b and c -> 6.25 and 18.75; the one left over
    # goes to the larger remainder (c)
    assert allocate({"a": 5, "b": 100, "c": 300}, 50, floor=10) == {"a": 5, "b": 16, "c": 29}
    # proportional shares capped at a module's size move on to the others
    assert allocate({"a": 12, "b": 1000}, 40, floor=10) == {"a": 10, "b": 30}
    assert allocate({"a": 11, "b": 11, "c": 1000}, 500, floor=10) == {"a": 11, "b": 11, "c": 478}


def test_allocation_when_the_floors_or_the_population_bound_it():
    assert allocate({m: 50 for m in "abcde"}, 30, floor=10) == {m: 10 for m in "abcde"}   # floors win: 50 > 30
    assert allocate({"a": 3, "b": 7, "empty": 0}, 400) == {"a": 3, "b": 7}                 # all there is
    sizes = {f"m{i}": s for i, s in enumerate([13, 271, 803, 22, 5000, 9, 640])}
    got = allocate(sizes, 400)
    assert sum(got.values()) == 400 and all(min(10, s) <= got[m] <= s for m, s in sizes.items())


def test_draw_is_a_seeded_stratified_sample():
    mutants = {"a": [f"a.x_f__mutmut_{i}" for i in range(1, 41)], "b": [f"b.x_g__mutmut_{i}" for i in range(1, 301)]}
    one = draw(mutants, 60, seed=7)
    assert one == draw(mutants, 60, seed=7)                       # a seed names one sample
    assert one != draw(mutants, 60, seed=8)
    assert len(one) == len(set(one)) == 60
    # floors 10 + 10; the other 40 split 40:300 -> 4.71 and 35.29; the left-over one to a's larger remainder
    assert sum(m.startswith("a.") for m in one) == allocate({"a": 40, "b": 300}, 60)["a"] == 15
    assert set(one) <= set(mutants["a"] + mutants["b"])


@pytest.mark.parametrize("k, n, low, high", [   # Newcombe (1998), Stat Med 17:857, Table I, method 3 (score)
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)])
def test_wilson_matches_newcombes_table(k, n, low, high):
    got = wilson(k, n)
    assert round(got[0], 4) == low and round(got[1], 4) == high


def test_wilson_at_the_goal_scale():
    # 388/400 = 97%: the interval is asymmetric, its lower bound under the point, above 94%
    low, high = wilson(388, 400)
    assert 0.946 < low < 0.95 < 0.97 < high < 0.984
    assert wilson(400, 400)[1] == pytest.approx(1.0) and wilson(0, 0) == (0.0, 1.0)


def test_score_excludes_equivalents_and_weights_modules_by_size():
    # module A: 100 mutants, 10 drawn (weight 10 each), 9 killed; module B: 10 mutants, all drawn (weight 1), all killed
    verdicts = {f"A.x_f__mutmut_{i}": "killed" for i in range(9)} | {"A.x_f__mutmut_9": "survived"}
    verdicts |= {f"B.x_g__mutmut_{i}": "killed" for i in range(10)}
    module_of = {m: m[0] for m in verdicts}
    s = score(verdicts, module_of, {"A": 100, "B": 10})
    assert (s.detected, s.scored, s.ratio) == (19, 20, 0.95)
    assert s.estimate == pytest.approx((9 * 10 + 10 * 1) / 110)          # 90.9%: A's misses weigh 10x
    assert s.n_eff == pytest.approx(110 ** 2 / (10 * 10 ** 2 + 10 * 1))
    assert (s.low, s.high) == wilson(19, 20)
    eq = score(verdicts, module_of, {"A": 100, "B": 10}, equivalent={"A.x_f__mutmut_9"})
    assert (eq.detected, eq.scored, eq.estimate) == (19, 19, 1.0)


def test_timeouts_and_untested_mutants_count_as_missed_unchecked_ones_not_at_all():
    verdicts = {"A.x_f__mutmut_1": "killed", "A.x_f__mutmut_2": "timeout", "A.x_f__mutmut_3": "no tests",
                "A.x_f__mutmut_4": "not checked"}
    s = score(verdicts, {m: "A" for m in verdicts}, {"A": 4})
    assert (s.detected, s.scored) == (1, 3)


def test_ledger_claims_need_a_reason_and_the_functions_current_hash(tmp_path):
    text = "\n".join([
        "# Surviving mutants of engine.x",
        "- `x_f__mutmut_1` -> equivalent [fn abc123]: d / heads == d // heads when heads divides d",
        "- `engine.x.x_f__mutmut_2` (survived) -> equivalent [fn abc123]:",                      # no reason
        "- `x_f__mutmut_3` -> killed by tests/test_x.py::test_f",
        "- `x_f__mutmut_4` -> equivalent: an old claim without the function's hash"])
    assert ledger_equivalents(text) == {"x_f__mutmut_1": ("abc123", "d / heads == d // heads when heads divides d"),
                                        "x_f__mutmut_4": (None, "an old claim without the function's hash")}
    (tmp_path / "engine.x.md").write_text(text)
    survivors = {f"engine.x.x_f__mutmut_{i}": "engine.x" for i in (1, 2, 3, 4)}
    found, notes = equivalents(survivors, dict.fromkeys(survivors, "abc123"), tmp_path)
    assert found == {"engine.x.x_f__mutmut_1"} and len(notes) == 1 and "mutmut_4" in notes[0]
    changed, notes = equivalents(survivors, dict.fromkeys(survivors, "ffff00"), tmp_path)   # the function changed
    assert changed == set() and len(notes) == 2
