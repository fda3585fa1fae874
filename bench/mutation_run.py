"""`make mutate-sample`: the mutation score of a seeded stratified sample of mutmut's mutants, with its interval.

  python -m bench.mutation_run [--seed S] [--n 400] [--floor 10] [--jobs 2] [--minutes M]

mutmut 3.8.1 writes every mutant of the [tool.mutmut] modules into mutants/ (each function behind a trampoline
that a variable switches); bench/mutation_sample.py draws the sample and scores it; bench/mutation_plugin.py,
inside one pytest process over the engine tests ([tool.mutmut]'s selection), maps each test to the sampled
functions it calls and runs each mutant against those tests only. The report (score, Wilson interval, seed,
cost, every missed mutant with its change) replaces this seed's section of bench/mutation.txt.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import secrets
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

from bench.mutation_sample import DETECTED, MISSED, draw, equivalents, score

ROOT = Path(__file__).resolve().parents[1]
LEDGERS = ROOT / "bench" / "mutants"
REPORT = ROOT / "bench" / "mutation.txt"
KEEP_SECTIONS = 4                      # the report keeps the newest runs of this many seeds


def generate(jobs: int) -> dict[str, dict]:
    """(Re)write mutants/ with mutmut (functions whose code is unchanged keep their mutants); mutant -> info."""
    import mutmut.__main__ as mm
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.utils.file_utils import walk_mutatable_files
    from mutmut.utils.format_utils import get_module_from_key, mangled_name_from_mutant_name
    from mutmut.configuration import config
    for extra in config().also_copy:                 # stale copies of deleted tests must not be collected
        target = Path("mutants") / extra
        if target.is_dir():
            shutil.rmtree(target)
    for path in walk_mutatable_files():               # a file newly in only_mutate: mutmut would keep its plain copy
        if not Path(f"mutants/{path}.meta").exists():
            Path("mutants", path).unlink(missing_ok=True)
    with contextlib.redirect_stdout(io.StringIO()):
        mm.copy_src_dir()
        mm.copy_also_copy_files()
        mm.create_mutants(jobs)
    out = {}
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name in data.exit_code_by_key:
            fn = mangled_name_from_mutant_name(name)
            out[name] = {"module": get_module_from_key(fn), "function": fn, "path": str(path),
                         "hash": data.hash_by_function_name.get(fn.rpartition(".")[2])}
    return out


def diff_of(mutant: str, path: str) -> str:
    """The changed lines of a mutant ("- old / + new")."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    try:
        lines = get_diff_for_mutant(mutant, path=path).splitlines()
    except Exception as e:                               # a report line, never a crash of the report
        return f"(no diff: {e})"
    return " / ".join(ln[:1] + " " + ln[1:].strip() for ln in lines if ln[:1] in "+-" and ln[:3] not in ("+++", "---"))


def run_pytest(plan_path: Path, tests: list[str]) -> int:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MUTANT_UNDER_TEST")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MUTATE_PLAN=str(plan_path), PY_IGNORE_IMPORTMISMATCH="1")
    cmd = [sys.executable, "-m", "pytest", "-p", "bench.mutation_plugin", "--rootdir=.",
           *cfg["pytest_add_cli_args"], *(tests or cfg["pytest_add_cli_args_test_selection"])]
    return subprocess.run(cmd, cwd=ROOT / "mutants", env=env).returncode


def report(seed: int, sample: list[str], info: dict[str, dict], results: dict[str, dict], coverage: dict,
           timing: dict, floor: int, jobs: int, load: str, commit: str) -> str:
    sizes = Counter(i["module"] for i in info.values())
    verdicts = {m: results.get(m, {}).get("status", "not checked") for m in sample}
    module_of = {m: info[m]["module"] for m in sample}
    missed = {m: module_of[m] for m, v in verdicts.items() if v in MISSED}
    equiv, lapsed = equivalents(missed, {m: info[m]["hash"] for m in missed}, LEDGERS)
    s = score(verdicts, module_of, dict(sizes), equiv)
    unchecked = sum(v not in DETECTED + MISSED for v in verdicts.values())
    failing = sorted(t for t, d in coverage.items() if d["failed"])
    wall = {k: timing.get(f"{k}_s", 0) / 60 for k in ("generate", "collect", "coverage", "mutants")}
    cpu = {k: timing.get(f"{k}_cpu", 0) / 60 for k in wall}
    lines = [f"## seed {seed}",
             f"mutation sample, seed {seed} (`make mutate-sample SEED={seed}` draws it again): {len(sample)} of "
             f"{len(info):,} mutants over {len(sizes)} modules (>= {floor} each, the rest in proportion), "
             f"commit {commit}",
             f"score: {s.detected}/{s.scored} detected = {100 * s.ratio:.1f}%, Wilson 95% interval "
             f"[{100 * s.low:.1f}%, {100 * s.high:.1f}%]; {len(equiv)} equivalent (ledger, excluded)"
             + (f"; {unchecked} not checked (stopped by the time limit)" if unchecked else ""),
             f"population estimate (each module weighted by its mutants): {100 * s.estimate:.1f}%, "
             f"[{100 * s.est_low:.1f}%, {100 * s.est_high:.1f}%] at Kish's effective n = {s.n_eff:.0f}",
             f"cost: {sum(wall.values()):.1f} min wall with {jobs} jobs, load {load} before the run "
             f"(generate {wall['generate']:.1f}, collect {wall['collect']:.1f}, map tests to functions "
             f"{wall['coverage']:.1f}, mutants {wall['mutants']:.1f}); CPU {sum(cpu.values()):.1f} min "
             f"({cpu['generate']:.1f}, {cpu['collect']:.1f}, {cpu['coverage']:.1f}, {cpu['mutants']:.1f}): on "
             f"{jobs} idle cores about {(cpu['generate'] + cpu['collect']) + (cpu['coverage'] + cpu['mutants']) / jobs:.0f} min",
             "verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(verdicts.values()).items())),
             "per module (detected/scored of drawn):"]
    for module in sorted(sizes):
        mine = [m for m in sample if module_of[m] == module]
        if mine:
            scored = [m for m in mine if m not in equiv and verdicts[m] in DETECTED + MISSED]
            lines.append(f"  {module}: {sum(verdicts[m] in DETECTED for m in scored)}/{len(scored)} of "
                         f"{len(mine)} drawn ({sizes[module]:,} mutants)")
    if failing:
        lines.append(f"tests failing on the unmutated code (left out of every selection): {', '.join(failing)}")
    lines.append(f"missed ({len(missed) - len(equiv)}; `mutmut show NAME` prints the change; a ledger line "
                 "`- \\`NAME\\` -> equivalent [fn HASH]: reason` in bench/mutants/<module>.md excludes one):")
    for m in sorted(set(missed) - equiv):
        r = results.get(m, {})
        lines.append(f"  {m}: {verdicts[m]} [fn {info[m]['hash']}], {r.get('tests', 0)} tests, "
                     f"{r.get('wall', 0):.0f} s: {diff_of(m, info[m]['path'])}")
    if equiv:
        lines.append("equivalent: " + ", ".join(sorted(equiv)))
    lines += [f"  note: {n}" for n in lapsed]
    return "\n".join(lines) + "\n"


def save(section: str, seed: int) -> None:
    """Replace this seed's section of bench/mutation.txt (newest first, at most KEEP_SECTIONS)."""
    head = "# make mutate-sample: sampled mutation scores (newest first; bench/mutation_run.py)\n\n"
    old = REPORT.read_text().split("\n## seed ") if REPORT.exists() else []
    kept = ["## seed " + s.strip() + "\n" for s in old[1:] if not s.startswith(f"{seed}\n")]
    REPORT.write_text(head + "\n".join([section] + kept[:KEEP_SECTIONS - 1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=None, help="the sample's seed (default: a new random one)")
    ap.add_argument("--n", type=int, default=400, help="mutants to draw (default 400)")
    ap.add_argument("--floor", type=int, default=10, help="at least this many per module (default 10)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants (and test files) run at once (default 2)")
    ap.add_argument("--minutes", type=float, default=None, help="start no mutant after this many minutes")
    ap.add_argument("--tests", nargs="*", default=[], help="test paths instead of [tool.mutmut]'s selection")
    ap.add_argument("--no-save", action="store_true", help="print the report, leave bench/mutation.txt alone")
    args = ap.parse_args(argv)
    seed = secrets.randbelow(10**6) if args.seed is None else args.seed
    print(f"seed {seed}", flush=True)
    start, load = time.time(), " ".join(f"{x:.1f}" for x in os.getloadavg())
    os.chdir(ROOT)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    commit += " + uncommitted changes" if subprocess.run(["git", "status", "--porcelain", "--", "engine", "tests"],
                                                          capture_output=True, text=True).stdout else ""
    info = generate(args.jobs)           # the code as it is now is what gets mutated: name it before the run
    by_module: dict[str, list[str]] = {}
    for m, i in info.items():
        by_module.setdefault(i["module"], []).append(m)
    sample = draw(by_module, args.n, seed, args.floor)
    import random
    order = random.Random(seed).sample(sample, len(sample))   # a run stopped early checked a random subset
    out = ROOT / "mutants" / "sample"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    generated = time.time() - start
    usage = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    generated_cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    print(f"{len(info):,} mutants in {len(by_module)} modules; drawing {len(sample)} "
          f"(generated in {generated:.0f} s)", flush=True)
    plan = {"mutants": order, "functions": sorted({info[m]["function"] for m in sample}), "jobs": args.jobs,
            "out": str(out), "deadline": start + 60 * args.minutes if args.minutes else None}
    (out / "plan.json").write_text(json.dumps(plan))
    code = run_pytest(out / "plan.json", args.tests)
    if not (out / "results.jsonl").exists():
        print(f"the mutation run failed (pytest exit {code}) before checking any mutant", file=sys.stderr)
        return 1
    results = {r["mutant"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    timing = {**json.loads((out / "timing.json").read_text()), "generate_s": generated, "generate_cpu": generated_cpu}
    section = report(seed, sample, info, results, json.loads((out / "coverage.json").read_text()), timing,
                     args.floor, args.jobs, load, commit)
    print(section)
    if not args.no_save:
        save(section, seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
