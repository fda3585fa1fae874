"""Mutation score from mutmut's results: killed / (killed + survived + timeout + no tests), per module.

Run by `make mutate` after `mutmut run`; prints the score and every surviving mutant (bench/mutation.txt).
A timeout counts as killed (the mutant made the tests hang, which a developer would notice); a mutant that no
selected test reaches counts against the score, as a survivor does.
"""
from __future__ import annotations

import collections
import itertools
import subprocess
import sys

DETECTED = {"killed", "timeout", "caught by type check", "segfault"}
MISSED = {"survived", "no tests", "suspicious"}


def main() -> int:
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], capture_output=True,
                         text=True, check=True).stdout
    by_module: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    missed = []
    for line in out.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if not name or status not in DETECTED | MISSED:
            continue                                   # not checked in this run (or skipped)
        # names look like engine.budget.params.x_count_params__mutmut_3 (methods: x\u01c1Class\u01c1name)
        module = ".".join(itertools.takewhile(lambda p: not p.startswith(("x_", "x\u01c1")), name.split(".")))
        by_module[module][status in DETECTED] += 1
        if status in MISSED:
            missed.append(f"{name}: {status}")
    total = sum(sum(c.values()) for c in by_module.values())
    killed = sum(c[True] for c in by_module.values())
    if not total:
        print("no mutants were checked")
        return 1
    print(f"mutation score: {killed}/{total} killed = {100 * killed / total:.1f}%")
    for module, c in sorted(by_module.items()):
        n = c[True] + c[False]
        print(f"  {module}: {c[True]}/{n} = {100 * c[True] / n:.1f}%")
    print(f"surviving mutants ({len(missed)}); `mutmut show NAME` prints the change:")
    print("\n".join(f"  {m}" for m in missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
