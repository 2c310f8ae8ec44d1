"""Layer norm against NumPy (float64): values with and without weight and bias, the fused
backward against the formula written out and against the same function built from primitive
ops, a constant row (σ² = 0), and shape errors."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F

pytestmark = pytest.mark.filterwarnings("error")


def np_layer_norm(x, w=None, b=None, eps=1e-5):
    x_hat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return x_hat * (1 if w is None else w) + (0 if b is None else b)


@pytest.mark.parametrize("with_weight,with_bias", [(True, True), (False, False), (True, False),
                                                   (False, True)])
def test_values_match_numpy(with_weight, with_bias, rng):
    x, w, b = rng.standard_normal((2, 3, 6)), rng.standard_normal(6), rng.standard_normal(6)
    w, b = (w if with_weight else None), (b if with_bias else None)
    out = F.layer_norm(ta.Tensor(x), None if w is None else ta.Tensor(w),
                       None if b is None else ta.Tensor(b), eps=1e-3)
    assert out.op == "layer_norm"                                   # one fused op, not a chain
    np.testing.assert_allclose(out.data, np_layer_norm(x, w, b, eps=1e-3), rtol=1e-12)


def test_backward_matches_the_formula_and_the_primitive_composition(rng):
    x, w, b = rng.standard_normal((4, 5)), rng.standard_normal(5), rng.standard_normal(5)
    dy = rng.standard_normal((4, 5))
    tx, tw, tb = (ta.Tensor(a, requires_grad=True) for a in (x, w, b))
    F.layer_norm(tx, tw, tb).backward(dy)

    rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    x_hat = (x - x.mean(-1, keepdims=True)) * rstd
    g = dy * w
    dx = rstd * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True))
    np.testing.assert_allclose(tx.grad, dx, rtol=1e-10)
    np.testing.assert_allclose(tw.grad, (dy * x_hat).sum(0), rtol=1e-10)
    np.testing.assert_allclose(tb.grad, dy.sum(0), rtol=1e-10)

    # The same function from mean, var, sqrt, div, mul, add: the engine's chain rule must agree.
    px, pw, pb = (ta.Tensor(a, requires_grad=True) for a in (x, w, b))
    centered = px - px.mean(axis=-1, keepdims=True)
    y = centered / (px.var(axis=-1, keepdims=True, correction=0) + 1e-5).sqrt() * pw + pb
    y.backward(dy)
    for fused, chained in ((tx, px), (tw, pw), (tb, pb)):
        np.testing.assert_allclose(fused.grad, chained.grad, rtol=1e-9, atol=1e-12)


def test_gradcheck_without_weight_and_bias(rng):
    x = ta.Tensor(rng.standard_normal((3, 4)), requires_grad=True)
    assert ta.gradcheck(lambda t: F.layer_norm(t, eps=0.5), [x])


def test_constant_row_is_finite():
    x = ta.Tensor(np.full((2, 4), 3.0), requires_grad=True)
    y = F.layer_norm(x)
    np.testing.assert_array_equal(y.data, np.zeros((2, 4)))
    y.backward(np.arange(8.0).reshape(2, 4))
    assert np.isfinite(x.grad).all()
    # dx = rstd · (ĝ − mean ĝ) when x̂ = 0, with rstd = 1/√eps.
    np.testing.assert_allclose(x.grad[0], (np.arange(4.0) - 1.5) / np.sqrt(1e-5), rtol=1e-10)


def test_float32_stays_float32(rng):
    x = ta.Tensor(rng.standard_normal((2, 3)).astype(np.float32))
    assert F.layer_norm(x, ta.ones(3), ta.zeros(3)).dtype == np.float32


def test_shape_errors_name_both_shapes():
    x = ta.Tensor(np.zeros((2, 3, 6)))
    with pytest.raises(ta.ShapeError, match=r"layer_norm: weight of shape \(5,\) .* x \(2, 3, 6\)"):
        F.layer_norm(x, ta.Tensor(np.ones(5)))
    with pytest.raises(ta.ShapeError, match=r"layer_norm: bias of shape \(3, 6\) .* x \(2, 3, 6\)"):
        F.layer_norm(x, None, ta.Tensor(np.ones((3, 6))))
    with pytest.raises(TypeError, match="layer_norm: x must be a float tensor"):
        F.layer_norm(ta.Tensor([[1, 2]]))
