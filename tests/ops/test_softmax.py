"""Softmax and log-softmax against NumPy, and the masking rule: True = takes part, float mask
is added, masked positions get 0, a fully masked row gives zeros and a zero gradient, no NaN.

Every test here runs with NumPy warnings raised as errors (`pytestmark`), so an overflow or a
0/0 anywhere in forward or backward fails the test, not just a NaN in the result.
"""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.kernels.reductions import row_max
from tinygrad_attn.ops.masking import masked_logits
from tinygrad_attn.ops.softmax import softmax_parts

pytestmark = pytest.mark.filterwarnings("error")


def np_softmax(z, axis=-1):
    """Softmax with −inf entries allowed and an all −inf row mapped to zeros (the API's rule)."""
    m = z.max(axis=axis, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(m), m, 0))
    s = e.sum(axis=axis, keepdims=True)
    return e / np.where(s > 0, s, 1)


def np_softmax_vjp(y, dy, axis=-1):
    """dx = Jᵀ dy with the Jacobian J = diag(y) − y yᵀ built explicitly, row by row."""
    y_rows, dy_rows = np.moveaxis(y, axis, -1), np.moveaxis(dy, axis, -1)
    dx = np.empty_like(y_rows)
    for idx in np.ndindex(y_rows.shape[:-1]):
        p = y_rows[idx]
        dx[idx] = (np.diag(p) - np.outer(p, p)).T @ dy_rows[idx]
    return np.moveaxis(dx, -1, axis)


def test_values_match_numpy_on_any_axis(rng):
    x = rng.standard_normal((2, 3, 5))
    for axis in (0, 1, -1):
        np.testing.assert_allclose(F.softmax(ta.Tensor(x), axis=axis).data, np_softmax(x, axis))
        np.testing.assert_allclose(F.log_softmax(ta.Tensor(x), axis=axis).data,
                                   np.log(np_softmax(x, axis)))


def test_float32_stays_float32(rng):
    x = ta.Tensor(rng.standard_normal((2, 3)).astype(np.float32))
    assert F.softmax(x).dtype == np.float32 and F.log_softmax(x, mask=[True, False, True]).dtype == np.float32


@pytest.mark.parametrize("scale,dtype", [(1e4, np.float64), (1e30, np.float64), (1e300, np.float64),
                                         (1e4, np.float32), (1e38, np.float32)])
def test_huge_logits_stay_finite(scale, dtype):
    x = ta.Tensor((np.array([[1.0, -1.0, 0.5], [-1.0, -1.0, -1.0]]) * scale).astype(dtype),
                  requires_grad=True)
    p, lp = F.softmax(x), F.log_softmax(x)
    p.backward(np.arange(6.0).reshape(2, 3))
    assert np.isfinite(p.data).all() and np.isfinite(lp.data).all() and np.isfinite(x.grad).all()
    np.testing.assert_allclose(p.data, [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-6)
    np.testing.assert_allclose(lp.data[0], np.array([0, -2, -0.5], dtype) * dtype(scale), rtol=1e-6)
    np.testing.assert_allclose(x.grad, [[0, 0, 0], [-1 / 3, 0, 1 / 3]], atol=1e-6)  # y ⊙ (dy − ⟨dy, y⟩)
    x.zero_grad()
    lp.backward(np.ones((2, 3)))
    np.testing.assert_allclose(x.grad, [[-2, 1, 1], [0, 0, 0]], atol=1e-6)   # dy − y Σ dy


def test_backward_is_the_jacobian_vector_product(rng):
    x = rng.standard_normal((3, 4))
    dy = rng.standard_normal((3, 4))
    for axis in (0, 1):
        y = np_softmax(x, axis)
        t = ta.Tensor(x, requires_grad=True)
        F.softmax(t, axis=axis).backward(dy)
        np.testing.assert_allclose(t.grad, np_softmax_vjp(y, dy, axis))
        t.zero_grad()
        F.log_softmax(t, axis=axis).backward(dy)
        np.testing.assert_allclose(t.grad, dy - y * dy.sum(axis, keepdims=True))


def test_boolean_mask_true_takes_part_and_float_mask_is_added(rng):
    x = rng.standard_normal((2, 4))
    keep = np.array([[True, False, True, True], [True, True, False, False]])
    z = np.where(keep, x, -np.inf)
    np.testing.assert_allclose(F.softmax(ta.Tensor(x), mask=keep).data, np_softmax(z))
    assert (F.softmax(ta.Tensor(x), mask=keep).data[~keep] == 0).all()
    lp = F.log_softmax(ta.Tensor(x), mask=keep).data
    assert np.isneginf(lp[~keep]).all()
    np.testing.assert_allclose(lp[keep], np.log(np_softmax(z)[keep]))
    bias = np.array([0.0, 1.0, -2.0, 0.5])
    np.testing.assert_allclose(F.softmax(ta.Tensor(x), mask=bias).data, np_softmax(x + bias))
    np.testing.assert_allclose(F.log_softmax(ta.Tensor(x), mask=bias).data,
                               np.log(np_softmax(x + bias)))
    np.testing.assert_allclose(F.softmax(ta.Tensor(x), mask=ta.Tensor(keep)).data, np_softmax(z))
    np.testing.assert_allclose(F.softmax(ta.Tensor(x), mask=keep.tolist()).data, np_softmax(z))


def test_mask_broadcasts_and_follows_the_axis(rng):
    x = rng.standard_normal((4, 3))
    keep = np.array([[True], [False], [True], [True]])           # (4, 1): row 1 masked on axis 0
    y = F.softmax(ta.Tensor(x), axis=0, mask=keep).data
    np.testing.assert_allclose(y, np_softmax(np.where(keep, x, -np.inf), axis=0))
    assert (y[1] == 0).all()
    causal = np.tril(np.ones((4, 4), bool))
    x = rng.standard_normal((2, 4, 4))
    np.testing.assert_allclose(F.softmax(ta.Tensor(x), mask=causal).data,
                               np_softmax(np.where(causal, x, -np.inf)))
    np.testing.assert_allclose(F.softmax(ta.Tensor(x), mask=causal).data[:, 0, 0], [1, 1])


def test_masked_gradient_matches_explicit_jacobian(rng):
    x = rng.standard_normal((3, 5))
    keep = rng.random((3, 5)) > 0.4
    keep[:, 0] = True
    dy = rng.standard_normal((3, 5))
    y = np_softmax(np.where(keep, x, -np.inf))
    t = ta.Tensor(x, requires_grad=True)
    F.softmax(t, mask=keep).backward(dy)
    np.testing.assert_allclose(t.grad, np_softmax_vjp(y, dy))
    assert (t.grad[~keep] == 0).all()
    t.zero_grad()
    # The cotangent at a masked log-probability (the constant −inf) is ignored, even if ±inf.
    dy_inf = np.where(keep, dy, np.inf)
    F.log_softmax(t, mask=keep).backward(dy_inf)
    kept_dy = np.where(keep, dy, 0)
    np.testing.assert_allclose(t.grad, kept_dy - y * kept_dy.sum(-1, keepdims=True))
    assert (t.grad[~keep] == 0).all()


@pytest.mark.parametrize("mask", [
    np.array([[True, True, False], [False, False, False]]),
    np.array([[0.0, 0.0, -np.inf], [-np.inf, -np.inf, -np.inf]]),
    ta.Tensor(np.array([[0.0, 0.0, -np.inf], [-np.inf, -np.inf, -np.inf]], np.float32)),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fully_masked_row_gives_zeros_and_zero_gradient(mask, dtype):
    x = ta.Tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype), requires_grad=True)
    cot = np.array([[1.0, -2.0, 3.0], [0.5, 2.0, -1.0]], dtype)
    for fn in (F.softmax, F.log_softmax):
        x.zero_grad()
        y = fn(x, mask=mask)
        np.testing.assert_array_equal(y.data[1], [0.0, 0.0, 0.0])
        y.backward(cot)
        np.testing.assert_array_equal(x.grad[1], [0.0, 0.0, 0.0])
        assert x.grad[0, 2] == 0.0 and np.isfinite(x.grad).all()
    np.testing.assert_allclose(F.softmax(x, mask=mask).data[0, :2], np_softmax(np.array([1.0, 2.0])),
                               rtol=1e-6)


def test_everything_masked_under_detect_anomaly_raises_nothing():
    x = ta.Tensor(np.zeros((2, 3)), requires_grad=True)
    with ta.detect_anomaly():
        y = F.softmax(x, mask=np.zeros((2, 3), bool))
        (y * ta.Tensor(np.ones((2, 3)))).sum().backward()
    assert (y.data == 0).all() and (x.grad == 0).all()


def test_softmax_parts_of_masked_logits_reports_rows_with_no_position():
    """The helpers attention imports: probs, the row max (the lowest float on an empty row), the row sum."""
    x = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    keep = np.array([[True, True, False], [False, False, False]])
    probs, m, s = softmax_parts(np, masked_logits(np, x, keep, None), -1)
    np.testing.assert_allclose(probs, [[1 / (1 + np.e), np.e / (1 + np.e), 0], [0, 0, 0]])
    np.testing.assert_array_equal(m[:, 0], [2.0, np.finfo(np.float64).min])
    np.testing.assert_allclose(s[:, 0], [1 + np.exp(-1.0), 0.0])
    probs, _, s = softmax_parts(np, masked_logits(np, x, None, np.array([0.0, -np.inf, 0.0])), 1)
    np.testing.assert_allclose(probs[0], [1 / (1 + np.e**2), 0, np.e**2 / (1 + np.e**2)])


def test_bad_inputs_raise():
    x = ta.Tensor(np.zeros((2, 3)))
    with pytest.raises(ta.ShapeError, match=r"softmax: mask of shape \(4,\) does not broadcast to \(2, 3\)"):
        F.softmax(x, mask=np.ones(4, bool))
    with pytest.raises(ta.ShapeError, match=r"mask of shape \(3, 2, 3\) does not broadcast to \(2, 3\)"):
        F.log_softmax(x, mask=np.ones((3, 2, 3), bool))            # a mask may not enlarge x
    with pytest.raises(ta.ShapeError, match=r"log_softmax: axis 2 is out of range"):
        F.log_softmax(x, axis=2)
    with pytest.raises(TypeError, match="mask must be boolean .* or float .* got dtype int64"):
        F.softmax(x, mask=np.array([1, 0, 1]))                     # 0/1 ints are not a keep-mask
    with pytest.raises(TypeError, match="softmax: x must be a float tensor, got dtype int64"):
        F.softmax(ta.Tensor([[1, 2, 3]]))


@pytest.mark.parametrize("shape", [(300, 1), (300, 2), (300, 3), (512, 7), (2048, 16), (64, 4, 32, 32),
                                   (300, 63), (300, 64), (300, 65), (8, 4), (2048, 15), (64, 10),
                                   (31, 4), (32, 4), (127, 64), (128, 64)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_max_is_numpys_max_with_nan_and_fully_masked_rows(shape, dtype):
    """row_max reduces many short rows (≥ 32 rows, at least twice as many as their length, of ≤ 64)
    as the columns of a transposed copy instead of calling NumPy's max: the same values, NaN and
    −inf included, on either side of each bound."""
    z = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    z.flat[::97] = -np.inf
    z[..., 0, :] = -np.inf                              # a fully masked row
    z.flat[5::1013] = np.nan
    np.testing.assert_array_equal(row_max(np, z), z.max(axis=-1, keepdims=True))
