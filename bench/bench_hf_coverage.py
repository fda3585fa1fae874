"""Real-config coverage: every published config.json in tests/data/hf_configs imported with `import_hf_config`;
prints one markdown row per family (imported with transformers' exact meta-device count / collected) and the
refusals with the key each names (issue #13, index.json); then one row per 2025-26 file of recent.json with its
total and active counts against transformers' and the refusal it names (issue #24). `python -m bench hf_coverage`."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from engine.budget.params import count_params
from engine.config import ConfigError
from engine.interop.hf_config import import_hf, import_hf_config
from engine.limits import json_loads

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "hf_configs"


def coverage() -> tuple[dict[str, list[int]], list[str]]:
    """family -> [exact, collected], and one line per config that is refused or counts differently."""
    index = json.loads((DATA / "index.json").read_text())
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses = []
    for name, meta in sorted(index.items()):
        row = table[meta["model_type"]]
        row[1] += 1
        try:
            cfg, _ = import_hf_config(json.loads((DATA / name).read_text()))
        except ConfigError as e:
            misses.append(f"{name}: refused, {e.problems[0]}")
            continue
        ours = count_params(cfg).total
        if ours == meta["hf_params"]:
            row[0] += 1
        else:
            misses.append(f"{name}: {ours:,} vs transformers {meta['hf_params']:,}")
    return dict(table), misses


def main() -> None:
    table, misses = coverage()
    exact, total = sum(r[0] for r in table.values()), sum(r[1] for r in table.values())
    print(f"{exact} of {total} published configs import with transformers' exact count ({exact / total:.0%})\n")
    print("| model_type | exact / collected |\n|---|---:|")
    for family, (ok, n) in sorted(table.items()):
        print(f"| {family} | {ok} / {n} |")
    for line in misses:
        print(f"- {line}")
    print_recent()


def recent() -> list[tuple[str, ...]]:
    """One row per recent.json file: model, released, copy, family, our total / active, outcome."""
    index = json.loads((DATA / "recent.json").read_text())
    rows = []
    for name, meta in sorted(index.items(), key=lambda kv: (kv[1]["released"], kv[0])):
        d = json_loads((DATA / name).read_text(), name, constants=True)
        try:
            got = import_hf(d)
        except ConfigError as e:
            rows.append((meta["model"], meta["released"], meta["copy"], meta["model_type"], "-", "-",
                         f"refused: {e.problems[0][:110]}"))
            continue
        counts = count_params(got.config)
        active = counts.active if got.config.n_experts is not None else None
        same = (counts.total, active) == (meta["hf_params"], meta["hf_active"])
        rows.append((meta["model"], meta["released"], meta["copy"], got.family, f"{counts.total:,}",
                     f"{active:,}" if active else "-", "exact" if same else f"differs: {meta['hf_params']:,}"))
    return rows


def print_recent() -> None:
    rows = recent()
    exact = sum(r[-1] == "exact" for r in rows)
    print(f"\n{exact} of {len(rows)} published 2025-26 configs import with transformers' exact total and active "
          f"counts ({exact / len(rows):.0%}); the others are refused naming the key:\n")
    print("| model | released | copy | family read | total | active | outcome |\n|---|---|---|---|---:|---:|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
