"""The sampled mutation score's arithmetic: draw a stratified sample, read the ledgers, score it with an interval.

Sample: every module (stratum) gets min(floor, its mutants), the rest of `n` goes to the modules in proportion
to their mutant counts (largest remainders, capped at a module's size); within a module the mutants are a
seeded `random.sample` of its sorted names, so a seed names one sample exactly.

Score: detected / (checked - equivalent). Detected = killed (a test failed or errored, or the process crashed).
Missed = survived, a timeout (the issue's rule: a timeout is not a kill), no covering test. Equivalent = a
survivor whose module ledger (bench/mutants/<module>.md) has a line naming it "-> equivalent: <reason>" with the
hash of the function's current code (`[fn <hash>]`, mutmut's per-function hash): a claim made for older code lapses
when the function changes. Interval: Wilson's score interval (Wilson 1927) at 95%. The floor over-samples small
modules, so the population estimate weights each sampled mutant by N_h / n_h and the interval uses Kish's
effective sample size (sum w)^2 / sum w^2 (Kish 1965); with proportional allocation both equal the plain k/n.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from pathlib import Path

DETECTED = ("killed",)
MISSED = ("survived", "timeout", "no tests")
Z95 = 1.959963984540054            # the standard normal's 97.5% quantile


def allocate(sizes: dict[str, int], n: int, floor: int = 10) -> dict[str, int]:
    """Mutants to draw per module: min(floor, size) each, the rest in proportion to size (largest remainder).
    When the floors alone exceed n, each module gets its floor (the sample grows past n)."""
    take = {m: min(floor, s) for m, s in sizes.items() if s > 0}
    left = min(n, sum(sizes.values())) - sum(take.values())
    while left > 0:
        room = {m: sizes[m] - take[m] for m in take if sizes[m] > take[m]}
        weight = sum(sizes[m] for m in room)
        shares = {m: min(room[m], left * sizes[m] / weight) for m in room}
        whole = {m: int(shares[m]) for m in room}
        rest = left - sum(whole.values())
        # largest remainders first, ties by name so the allocation is the same on every machine
        order = sorted((m for m in room if whole[m] < room[m]), key=lambda m: (whole[m] - shares[m], m))
        for m in order[:rest]:
            whole[m] += 1
        for m, k in whole.items():
            take[m] += k
        left -= sum(whole.values())
        if not any(whole.values()):
            break
    return take


def draw(mutants: dict[str, list[str]], n: int, seed: int, floor: int = 10) -> list[str]:
    """The seeded stratified sample: module -> its mutant names in, sampled names out (sorted)."""
    take = allocate({m: len(names) for m, names in mutants.items()}, n, floor)
    rng = random.Random(seed)
    out = []
    for module in sorted(take):
        out += rng.sample(sorted(mutants[module]), take[module])
    return sorted(out)


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for k successes in n trials (k, n may be weighted, non-integer)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Score:
    detected: int
    scored: int               # checked minus equivalent
    low: float
    high: float
    estimate: float           # weighted by module size
    est_low: float
    est_high: float
    n_eff: float

    @property
    def ratio(self) -> float:
        return self.detected / self.scored if self.scored else 0.0


def score(verdicts: dict[str, str], module_of: dict[str, str], sizes: dict[str, int],
          equivalent: set[str] = frozenset()) -> Score:
    """verdicts: mutant -> status (DETECTED or MISSED; others, e.g. "not checked", are left out)."""
    scored = {m: v for m, v in verdicts.items() if m not in equivalent and v in DETECTED + MISSED}
    k = sum(v in DETECTED for v in scored.values())
    low, high = wilson(k, len(scored))
    drawn: dict[str, int] = {}
    for m in verdicts:                                   # n_h: what was drawn from each module
        drawn[module_of[m]] = drawn.get(module_of[m], 0) + 1
    w = {m: sizes[module_of[m]] / drawn[module_of[m]] for m in scored}
    total = sum(w.values())
    if not total:
        return Score(k, 0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0)
    est = sum(w[m] for m, v in scored.items() if v in DETECTED) / total
    n_eff = total * total / sum(x * x for x in w.values())
    e_low, e_high = wilson(est * n_eff, n_eff)
    return Score(k, len(scored), low, high, est, e_low, e_high, n_eff)


_ENTRY = re.compile(r"^- `(?P<name>[^`]+)`.*?->\s*equivalent\b(?P<rest>.*)$")
_HASH = re.compile(r"\[fn (?P<hash>[0-9a-f]{6,})\]")


def ledger_equivalents(text: str) -> dict[str, tuple[str | None, str]]:
    """`- \\`name\\` ... -> equivalent [fn HASH]: reason` lines -> {name: (hash or None, reason)}; an entry
    with no reason after the colon is no claim."""
    out = {}
    for line in text.splitlines():
        hit = _ENTRY.match(line.strip())
        if not hit:
            continue
        rest = hit["rest"]
        h = _HASH.search(rest)
        reason = rest.partition(":")[2].strip()
        if reason:
            out[hit["name"].rpartition(".")[2]] = (h["hash"] if h else None, reason)
    return out


def equivalents(survivors: dict[str, str], fn_hash: dict[str, str], ledgers: Path) -> tuple[set[str], list[str]]:
    """Which survivors the ledgers call equivalent for the current code; and notes on claims that lapsed.
    survivors: mutant -> module; fn_hash: mutant -> the current hash of its function."""
    found, notes = set(), []
    cache: dict[str, dict] = {}
    for mutant, module in survivors.items():
        if module not in cache:
            path = ledgers / f"{module}.md"
            cache[module] = ledger_equivalents(path.read_text()) if path.exists() else {}
        claim = cache[module].get(mutant.rpartition(".")[2])
        if claim is None:
            continue
        if claim[0] == fn_hash.get(mutant):
            found.add(mutant)
        else:
            notes.append(f"{mutant}: the ledger's equivalence claim is for "
                         f"{'unhashed' if claim[0] is None else 'older'} code (function now [fn {fn_hash.get(mutant)}])")
    return found, notes
