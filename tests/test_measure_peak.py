"""Peak memory of a real training step: CUDA only; on CPU it says so instead of guessing."""
import pytest
import torch

from engine.budget.memory import memory_budget
from engine.measure.peak import MeasurementUnavailable, measure_peak
from tests.helpers import make


def test_cpu_reports_unavailable():
    with pytest.raises(MeasurementUnavailable, match="CUDA"):
        measure_peak(make({}), 2, 6, device="cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_peak_holds_the_training_state():
    cfg = make({}).replace(d_model=256, n_heads=4, n_layers=4, vocab_size=1000, context_length=256)
    m = measure_peak(cfg, 4, 128, "fp32", "cuda")
    b = memory_budget(cfg, 4, 128, "fp32", "fp32", "adamw")
    assert m.measured >= b.weights_bytes + b.grads_bytes + b.optimizer_bytes   # all alive after the step
    assert m.estimate == b.train_total_bytes
