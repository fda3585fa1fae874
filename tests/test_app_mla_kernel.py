"""MLA's activation closed form covers both attention kernels, with and without dropout: the Budgets page of an
MLA model under each renders its memory chart, no error (it once stopped with "not covered")."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("query", [{"kernel": "explicit"}, {"dropout": "0.1"}])
def test_budgets_with_mla_renders_under_every_kernel_and_dropout(new_app, query):
    at = new_app(page="pages/budgets.py", preset="deepseek-v3", **query)
    at.run(timeout=120)
    assert not at.exception and not at.error
