"""The refusal path: estimate vs free memory, checked before a real model is built."""
import math

import pytest
import torch

from engine import guard
from engine.guard import MemoryRefusal, check_fits, free_bytes, needed_bytes
from engine.measure.kvcache import measure_kv_cache
from engine.presets import get_preset
from engine.units import fmt_bytes


def test_free_bytes_reads_meminfo():
    assert 0 < free_bytes("cpu") < 2**50


def test_70b_training_is_refused_with_both_numbers():
    cfg = get_preset("llama-3-70b").config
    with pytest.raises(MemoryRefusal) as info:
        check_fits(cfg, "cpu", 1, 2048, "fp32", training=True)
    err = info.value
    assert err.estimate == needed_bytes(cfg, 1, 2048, "fp32", True) > err.free
    assert fmt_bytes(err.estimate) in str(err) and fmt_bytes(err.free) in str(err)


def test_small_model_fits_and_meta_always_fits(monkeypatch):
    cfg = get_preset("nanogpt-handout").config
    need = needed_bytes(cfg, 1, 4, "fp32", training=True)
    asked = []
    monkeypatch.setattr(guard, "free_bytes", lambda device: asked.append(str(device)) or math.ceil(need / 0.9))
    assert check_fits(cfg, "cpu", 1, 4, torch.float32, training=True) is None    # exactly at 90%: fits
    assert asked == ["cpu"]
    monkeypatch.setattr(guard, "free_bytes", lambda device: math.ceil(need / 0.9) - 2)
    with pytest.raises(MemoryRefusal):                                           # a byte over: refused
        check_fits(cfg, "cpu", 1, 4, torch.float32, training=True)
    # meta allocates nothing, so it never even asks how much memory is free
    monkeypatch.setattr(guard, "free_bytes", lambda device: pytest.fail("meta must not read free memory"))
    assert check_fits(get_preset("llama-3-70b").config, "meta", 64, 8192, "fp32") is None


def test_headroom_applies(monkeypatch):
    cfg = get_preset("gpt2").config
    need = needed_bytes(cfg, 1, 16, "bf16", training=False)
    monkeypatch.setattr(guard, "free_bytes", lambda device: int(need / 0.95))
    with pytest.raises(MemoryRefusal, match="90% usable"):
        check_fits(cfg, "cpu", 1, 16, "bf16", training=False)
    monkeypatch.setattr(guard, "free_bytes", lambda device: int(need / 0.85))
    check_fits(cfg, "cpu", 1, 16, "bf16", training=False)


def test_measurement_refuses_before_building(monkeypatch):
    monkeypatch.setattr(guard, "free_bytes", lambda device: 1000)
    with pytest.raises(MemoryRefusal):
        measure_kv_cache(get_preset("gpt2").config, 1, 8)


def test_bad_dtype():
    with pytest.raises(ValueError, match="dtype"):
        check_fits(get_preset("gpt2").config, "cpu", 1, 8, "int8")
