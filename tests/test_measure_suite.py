"""measure_config: the one measure-this-config sequence of the Budgets page and the CLI."""
import pytest

import engine.model
from engine import guard
from engine.guard import MemoryRefusal
from engine.measure.activations import measure_activations
from engine.measure.flops import measure_flops
from engine.measure.kvcache import measure_kv_cache
from engine.measure.peak import MeasurementUnavailable
from engine.measure.suite import measure_config
from tests.helpers import make

CFG = make({"n_kv_heads": 2, "attn_window": 3, "ffn": "swiglu"})


@pytest.fixture
def builds(monkeypatch):
    """Devices of every build_model call, whichever measure module makes it."""
    seen = []
    real = engine.model.build_model

    def spy(cfg, device="cpu", *args, **kw):
        seen.append(str(device))
        return real(cfg, device, *args, **kw)

    for mod in ("activations", "flops", "kvcache"):
        monkeypatch.setattr(f"engine.measure.{mod}.build_model", spy)
    return seen


def test_results_equal_the_single_measurements_in_order(builds):
    labels = []
    got = measure_config(CFG, 2, 6, "fp32", "explicit", "cpu", ("kv_cache", "flops", "activations"), labels.append)
    assert list(got) == ["forward_flops", "backward_flops", "activations_bytes", "kv_cache_bytes"]
    assert labels == ["Counting FLOPs on the meta device", f"Building {CFG.name} on cpu and recording saved tensors",
                      "Filling a KV cache"]
    assert builds == ["meta", "cpu", "cpu"]
    want = {**measure_flops(CFG, 2, 6, "explicit"), "activations_bytes": measure_activations(CFG, 2, 6, "explicit"),
            "kv_cache_bytes": measure_kv_cache(CFG, 2, 6)}
    assert got == want
    assert got["kv_cache_bytes"].error_pct == 0 and got["activations_bytes"].error_pct == 0


def test_refusal_comes_before_any_build_or_label(monkeypatch, builds):
    monkeypatch.setattr(guard, "free_bytes", lambda device: 1000)
    labels = []
    with pytest.raises(MemoryRefusal, match="refusing to build"):
        measure_config(CFG, 1, 8, steps=("flops", "activations", "kv_cache"), progress=labels.append)
    assert labels == [] and builds == []
    assert list(measure_config(CFG, 1, 8, steps=("flops",))) == ["forward_flops", "backward_flops"]  # meta only


def test_peak_off_cuda_and_unknown_steps_refused_up_front(builds):
    labels = []
    with pytest.raises(MeasurementUnavailable, match="CUDA"):
        measure_config(CFG, 1, 4, device="cpu", steps=("activations", "peak"), progress=labels.append)
    with pytest.raises(ValueError, match="latency"):
        measure_config(CFG, 1, 4, steps=("flops", "latency"))
    assert labels == [] and builds == []
