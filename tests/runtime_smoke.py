"""The app with nothing but requirements.txt installed: `make check-runtime` runs this in its own venv.

The dev requirements (pytest, transformers, playwright…) pull in packages of their own, so a suite run in the dev
venv cannot see a runtime import missing from requirements.txt (markdown-it-py was: every page of a fresh
`make run` showed a ModuleNotFoundError while `make test` was green). This script imports every module of
`app/` and `engine/` and runs every page of the app once under Streamlit's AppTest, and exits 1 naming each
failure. It needs streamlit and the engine's packages only, not pytest (not a test_ file: pytest skips it).
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEV_ONLY = {"pytest", "transformers", "peft", "safetensors", "playwright", "hypothesis", "mutmut"}


def _import_all(package: str) -> list[str]:
    failures = []
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        if info.name.endswith(".__main__"):   # the CLI entry runs on import
            continue
        try:
            importlib.import_module(info.name)
        except Exception:   # noqa: BLE001 -- every failure is reported, whatever it is
            failures.append(f"import {info.name}: {traceback.format_exc(limit=1).strip().splitlines()[-1]}")
    return failures


def _entry(app_path: str) -> None:
    import runpy
    runpy.run_path(app_path, run_name="__main__")


def _run_pages() -> list[str]:
    from streamlit.testing.v1 import AppTest
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "pages").glob("*.py"))
    failures = []
    for page in pages:
        at = AppTest.from_function(_entry, args=(str(ROOT / "streamlit_app.py"),), default_timeout=180)
        at.run()
        at.switch_page(str(ROOT / page))
        at.run()
        shown = [e.value for e in at.exception] + [e.value for e in at.error]
        if shown:
            failures.append(f"page {page}: {str(shown[0])[:300]}")
        else:
            print(f"ok   {page}", flush=True)
    return failures


def main() -> int:
    sys.path.insert(0, str(ROOT))
    present = sorted(m for m in DEV_ONLY if importlib.util.find_spec(m) is not None)
    if present:
        print(f"not a runtime-only environment: {', '.join(present)} installed", file=sys.stderr)
        return 1
    failures = _import_all("engine") + _import_all("app")
    failures += _run_pages()
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    print(f"runtime-only check: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
