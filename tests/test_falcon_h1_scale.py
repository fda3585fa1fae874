"""Falcon-H1's attention scale from its multipliers: q.k of inputs scaled by attention_in_multiplier a and a key
scaled by key_multiplier m is a^2 m q.k, so the scale is a^2 m / sqrt(head_dim); where a^2 m is 1 it is the plain
1 / sqrt(head_dim) and the imported config keeps no attn_scale of its own (its YAML says nothing extra)."""
from __future__ import annotations

import math

import pytest

from engine.interop.hf_config import import_hf
from tests.export_cases import TINY

HEAD_DIM = 32 // 4   # hidden_size / num_attention_heads of the tiny file


@pytest.mark.parametrize("a, m, scale", [(1.0, 1.0, None), (0.5, 4.0, None), (1.0, 0.8, 0.8 / math.sqrt(HEAD_DIM)),
                                         (2.0, 0.5, 2.0 / math.sqrt(HEAD_DIM))])
def test_the_attention_scale_is_set_only_where_the_multipliers_change_it(a, m, scale):
    d = {**TINY["tiny-falcon-h1"], "attention_in_multiplier": a, "key_multiplier": m}
    got = import_hf(d).config.attn_scale
    assert got == scale if scale is None else got == pytest.approx(scale, rel=1e-12)
