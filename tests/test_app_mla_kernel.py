"""An estimate that does not cover a valid config is a message, not an exception (MLA's activations are closed
for SDPA without dropout only)."""
from __future__ import annotations


def test_budgets_with_mla_and_the_explicit_kernel_says_what_is_not_covered(new_app):
    at = new_app(page="pages/budgets.py", preset="deepseek-v3", kernel="explicit")
    at.run()
    assert not at.exception
    assert any("MLA activation estimate covers sdpa" in e.value for e in [*at.error, *at.warning])
