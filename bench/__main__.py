"""`python -m bench [NAME ...]`: run every bench/bench_*.py module's main() (or only the named ones)."""
from __future__ import annotations

import importlib
import pkgutil
import sys
import traceback

import bench


def main(argv: list[str]) -> int:
    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))
    chosen = [n for n in names if not argv or n in argv or n.removeprefix("bench_") in argv]
    if argv and not chosen:
        print(f"no benchmark named {', '.join(argv)}; available: {', '.join(names)}", file=sys.stderr)
        return 2
    failed = []
    for name in chosen:
        print(f"== {name}", flush=True)
        try:
            importlib.import_module(f"bench.{name}").main()
        except Exception:   # one broken benchmark must not hide the others' figures
            traceback.print_exc()
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
