"""Module hygiene read from the source with ast: no import circles among engine/ and app/ modules (imports
inside functions count too: a lazy import hides a circle, it does not remove it; only `if TYPE_CHECKING:`
imports, which never run, are left out), the engine never imports streamlit, engine/ files stay short unless
a note at the top says why, and test files do not import each other."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "app")
MAX_LINES = 300


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _runtime_nodes(tree: ast.AST):
    """Every node except those under `if TYPE_CHECKING:` (imports for annotations only, never executed)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports; `from pkg import sub` counts as importing pkg.sub when sub is one."""
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + is_pkg]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name}


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path [a, b, ..., a], or None (depth-first search with colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (c := visit(n)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_the_finder_sees_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_real_edges():
    graph = import_graph()
    assert "engine.config" in graph["engine.budget.params"]
    assert "engine.commands" in graph["engine.cli"]          # `from engine import commands`
    assert "engine.layers.ffn" in graph["engine.config"]     # `from engine.layers import ffn as _ffn`
    assert "engine.config" not in graph["engine.layers.ffn"]  # only under TYPE_CHECKING
    assert "engine.interop.hf_models" in graph["engine.commands.interop"]   # imported inside a function


def test_no_import_circles():
    assert find_cycle(import_graph()) is None


def test_engine_files_are_short_or_say_why():
    long = []
    for path in (ROOT / "engine").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        head = text.split('"""')[1] if text.startswith('"""') else ""
        if text.count("\n") > MAX_LINES and "longer than" not in head:
            long.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert not long


def test_test_files_do_not_import_each_other():
    """Shared test code lives in tests/helpers.py or tests/conftest.py."""
    offenders = []
    for path in (ROOT / "tests").glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[-1].startswith("test_")]
    assert not offenders


def test_engine_never_imports_streamlit():
    """The engine runs without the UI: no engine module imports streamlit, not even lazily."""
    offenders = []
    for path in (ROOT / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "streamlit"]
    assert not offenders
