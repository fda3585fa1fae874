"""Mutation score from mutmut's results: detected / checked, per module, and how many mutants are not checked yet.

Run by `make mutate` after `mutmut run`; prints the score and every surviving mutant (bench/mutation-full.txt).
Detected: killed, timeout (the mutant made the tests run past mutmut's limit, which a developer would notice;
with one OpenMP thread a timeout is a real slowdown, not a forked child stuck on a lock), caught by the type
check, segfault. Missed: survived, no tests (a mutant no selected test reaches counts against the score, as a
survivor does), suspicious. A run stopped early leaves mutants "not checked": they are counted and printed, never
folded into the score, and the next `make mutate` resumes with them (mutmut keeps every verdict in mutants/).
"""
from __future__ import annotations

import collections
import itertools
import subprocess
import sys

DETECTED = {"killed", "timeout", "caught by type check", "segfault"}
MISSED = {"survived", "no tests", "suspicious"}
PENDING = "not checked"


def module_of(name: str) -> str:
    """engine.budget.params.x_count_params__mutmut_3 -> engine.budget.params (methods: x\u01c1Class\u01c1name)."""
    return ".".join(itertools.takewhile(lambda p: not p.startswith(("x_", "x\u01c1")), name.split(".")))


def tally(lines: list[str]) -> tuple[dict[str, collections.Counter], list[str]]:
    """Per module: counts of "detected", "missed" and "pending"; and the missed mutants as `name: status`."""
    by_module: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    missed = []
    for line in lines:
        name, _, status = line.strip().rpartition(": ")
        if not name:
            continue
        kind = "detected" if status in DETECTED else "missed" if status in MISSED else \
            "pending" if status == PENDING else None
        if kind is None:
            continue                                   # skipped, or interrupted by the user
        by_module[module_of(name)][kind] += 1
        if kind == "missed":
            missed.append(f"{name}: {status}")
    return by_module, missed


def main() -> int:
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], capture_output=True,
                         text=True, check=True).stdout
    by_module, missed = tally(out.splitlines())
    total = {k: sum(c[k] for c in by_module.values()) for k in ("detected", "missed", "pending")}
    checked = total["detected"] + total["missed"]
    if not checked:
        print("no mutants were checked")
        return 1
    print(f"mutation score: {total['detected']}/{checked} detected = {100 * total['detected'] / checked:.1f}% "
          f"of the checked mutants; {total['pending']} of {checked + total['pending']} not checked yet")
    for module, c in sorted(by_module.items()):
        n = c["detected"] + c["missed"]
        score = f"{100 * c['detected'] / n:5.1f}%" if n else "  n/a"
        print(f"  {module}: {c['detected']}/{n} = {score}, {c['pending']} not checked")
    print(f"missed mutants ({len(missed)}); `mutmut show NAME` prints the change:")
    print("\n".join(f"  {m}" for m in missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
