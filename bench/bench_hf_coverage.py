"""Real-config coverage (issue #13): every published config.json in tests/data/hf_configs imported with
`import_hf_config`; prints one markdown row per family (imported with transformers' exact meta-device count /
collected) and the refusals with the key each names. `python -m bench hf_coverage`."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from engine.budget.params import count_params
from engine.config import ConfigError
from engine.interop.hf_config import import_hf_config

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
