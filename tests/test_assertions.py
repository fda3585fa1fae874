"""Every test checks something: a test function must assert, expect an exception or warning (pytest.raises /
pytest.warns), or call a checking helper (assert*, check, check_*, e.g. torch.testing.assert_close, or
Playwright's expect(...), which waits and then asserts). A test that
only runs code passes whatever the code returns, so it cannot catch a wrong number."""
import ast
from pathlib import Path

TESTS = Path(__file__).parent


def _called_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _checks(fn: ast.FunctionDef) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            name = _called_name(node)
            if name in ("raises", "warns", "check", "expect") or name.startswith(("assert", "check_")):
                return True
    return False


def _test_functions(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from (f for f in node.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test"))


def test_every_test_function_checks_something():
    files = sorted(TESTS.glob("test_*.py"))
    assert len(files) > 50      # the whole suite is read, not an empty glob
    silent = [f"{path.name}::{fn.name}" for path in files
              for fn in _test_functions(ast.parse(path.read_text(encoding="utf-8")))
              if not _checks(fn)]
    assert silent == [], f"tests without an assertion: {silent}"


def test_the_rule_tells_a_silent_test_from_a_checking_one():
    src = ("def test_silent():\n    run()\n"
           "def test_asserts():\n    assert run() == 1\n"
           "def test_raises():\n    with pytest.raises(ValueError):\n        run()\n"
           "def test_helper():\n    torch.testing.assert_close(run(), 1)\n"
           "def test_checks_run():\n    check_run = run()\n")
    verdicts = {fn.name: _checks(fn) for fn in _test_functions(ast.parse(src))}
    assert verdicts == {"test_silent": False, "test_asserts": True, "test_raises": True, "test_helper": True,
                        "test_checks_run": False}
