"""Where the UI code lives: small files, and one meaning per figure-builder name across app/charts/."""
import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 300


def test_app_and_page_files_stay_small():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines())
             for d in ("app", "pages") for p in sorted((ROOT / d).rglob("*.py"))}
    assert sizes and {f: n for f, n in sizes.items() if n > MAX_LINES} == {}


def test_chart_function_names_are_unique_across_page_families():
    names = Counter(node.name for p in (ROOT / "app" / "charts").glob("*.py")
                    for node in ast.parse(p.read_text()).body
                    if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"))
    assert names and [n for n, k in names.items() if k > 1] == []
