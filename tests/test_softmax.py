"""Softmax and log-softmax against NumPy, and the masking rule: True = takes part, float mask
is added, masked positions get 0, a fully masked row gives zeros and a zero gradient, no NaN."""

import warnings

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F


def np_softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_values_match_numpy_on_any_axis(rng):
    x = rng.standard_normal((2, 3, 5))
    for axis in (0, 1, -1):
        np.testing.assert_allclose(F.softmax(ta.Tensor(x), axis=axis).data, np_softmax(x, axis))
        np.testing.assert_allclose(F.log_softmax(ta.Tensor(x), axis=axis).data,
                                   np.log(np_softmax(x, axis)))


@pytest.mark.parametrize("scale", [1e4, 1e30])
def test_huge_logits_stay_finite(scale):
    x = ta.Tensor(np.array([[1.0, -1.0, 0.5], [-1.0, -1.0, -1.0]]) * scale, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p, lp = F.softmax(x), F.log_softmax(x)
        (p * ta.Tensor(np.arange(6.0).reshape(2, 3))).sum().backward()
    assert np.isfinite(p.data).all() and np.isfinite(lp.data).all() and np.isfinite(x.grad).all()
    np.testing.assert_allclose(p.data, [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(lp.data[0], [0, -2 * scale, -0.5 * scale])


def test_boolean_mask_true_takes_part_and_float_mask_is_added(rng):
    x = rng.standard_normal((2, 4))
    keep = np.array([[True, False, True, True], [True, True, False, False]])
    z = np.where(keep, x, -np.inf)
    np.testing.assert_allclose(F.softmax(ta.Tensor(x), mask=keep).data, np_softmax(z))
    assert (F.softmax(ta.Tensor(x), mask=keep).data[~keep] == 0).all()
    assert np.isneginf(F.log_softmax(ta.Tensor(x), mask=keep).data[~keep]).all()
    bias = np.array([0.0, 1.0, -2.0, 0.5])
    np.testing.assert_allclose(F.softmax(ta.Tensor(x), mask=bias).data, np_softmax(x + bias))
    np.testing.assert_allclose(F.softmax(ta.Tensor(x), mask=ta.Tensor(keep)).data, np_softmax(z))


@pytest.mark.parametrize("mask", [
    np.array([[True, True, False], [False, False, False]]),
    np.array([[0.0, 0.0, -np.inf], [-np.inf, -np.inf, -np.inf]]),
])
def test_fully_masked_row_gives_zeros_and_zero_gradient(mask):
    x = ta.Tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), requires_grad=True)
    cot = np.array([[1.0, -2.0, 3.0], [0.5, 2.0, -1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for fn in (F.softmax, F.log_softmax):
            x.zero_grad()
            y = fn(x, mask=mask)
            np.testing.assert_array_equal(y.data[1], [0.0, 0.0, 0.0])
            y.backward(cot)
            np.testing.assert_array_equal(x.grad[1], [0.0, 0.0, 0.0])
            assert x.grad[0, 2] == 0.0 and np.isfinite(x.grad).all()


def test_backward_is_the_jacobian_vector_product(rng):
    x = rng.standard_normal(4)
    dy = rng.standard_normal(4)
    y = np_softmax(x)
    jacobian = np.diag(y) - np.outer(y, y)
    t = ta.Tensor(x, requires_grad=True)
    F.softmax(t).backward(dy)
    np.testing.assert_allclose(t.grad, jacobian @ dy)
    t.zero_grad()
    F.log_softmax(t).backward(dy)
    np.testing.assert_allclose(t.grad, (np.eye(4) - y[None, :]).T @ dy)


def test_bad_masks_and_axes_raise():
    x = ta.Tensor(np.zeros((2, 3)))
    with pytest.raises(ta.ShapeError, match=r"softmax: mask of shape \(4,\) does not broadcast to \(2, 3\)"):
        F.softmax(x, mask=np.ones(4, bool))
    with pytest.raises(ta.ShapeError, match=r"log_softmax: axis 2 is out of range"):
        F.log_softmax(x, axis=2)
    with pytest.raises(TypeError, match="boolean or float"):
        F.softmax(x, mask=np.array(["a", "b", "c"]))
