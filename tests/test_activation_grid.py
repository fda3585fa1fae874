"""Activation curves: values match the closed forms, autograd derivatives match finite differences."""
import math

import pytest

from engine.activation_grid import activation_curve, activation_curves, gated_surface
from engine.config import DENSE_FFNS, GATED_FFNS


def test_known_values():
    gelu = activation_curve("gelu", -1.0, 1.0, 3)
    assert gelu.y[0] == pytest.approx(-0.158655, abs=1e-6)
    assert gelu.dy[1] == pytest.approx(0.5)
    silu = activation_curve("silu", 0.0, 2.0, 2)
    assert silu.y[1] == pytest.approx(2 / (1 + math.exp(-2)))
    relu = activation_curve("relu", -1.0, 1.0, 2)
    assert relu.y == [0.0, 1.0] and relu.dy == [0.0, 1.0]


@pytest.mark.parametrize("name", DENSE_FFNS + GATED_FFNS)
def test_derivative_matches_finite_difference(name):
    c = activation_curve(name, -3.0, 3.0, 601)
    h = c.x[1] - c.x[0]
    for i in (50, 250, 350, 550):      # away from ReLU's kink at 0
        numeric = (c.y[i + 1] - c.y[i - 1]) / (2 * h)
        assert c.dy[i] == pytest.approx(numeric, rel=1e-3, abs=1e-6), (name, c.x[i])


def test_gated_product_is_act_times_x():
    silu, swiglu = activation_curve("silu", -2, 2, 9), activation_curve("swiglu", -2, 2, 9)
    assert swiglu.y == pytest.approx([s * x for s, x in zip(silu.y, silu.x)])
    assert swiglu.dy == pytest.approx([d * x + s for d, s, x in zip(silu.dy, silu.y, silu.x)])


def test_clamped_swiglu_draws_gpt_oss_limit_and_slope():
    """The chart's clamped SwiGLU is gpt-oss's: g'·σ(1.702·g')·(u' + 1), both inputs clipped at 7."""
    sig = lambda z: 1 / (1 + math.exp(-z))
    c = activation_curve("swiglu_clamped", 1.0, 8.0, 2)
    assert c.y == pytest.approx([sig(1.702) * 2, 7 * sig(7 * 1.702) * 8])
    s = gated_surface("swiglu_clamped", -1.0, 1.0, 2)
    assert s.z[1][0] == pytest.approx(-sig(-1.702) * 2)     # g = -1, u = 1


def test_gelu_tanh_close_to_exact():
    exact, approx = activation_curve("gelu", -4, 4, 81), activation_curve("gelu_tanh", -4, 4, 81)
    assert max(abs(a - b) for a, b in zip(exact.y, approx.y)) < 1e-3
    assert exact.y != approx.y


def test_surface_and_errors():
    s = gated_surface("reglu", -1, 1, 3)
    assert s.z[2][2] == pytest.approx(1.0) and s.z[0][0] == 0.0     # relu(-1) * -1 = 0
    assert set(activation_curves(n=3)) == set(DENSE_FFNS + GATED_FFNS)
    with pytest.raises(ValueError, match="activation"):
        activation_curve("tanh")
    with pytest.raises(ValueError, match="hi"):
        activation_curve("relu", 1, 1)
    with pytest.raises(ValueError, match="n"):
        activation_curve("relu", n=1)
    with pytest.raises(ValueError, match="gated ffn"):
        gated_surface("relu")
