"""Tensors behave like arrays where users expect it: iteration, owned gradients, scalar dtype
promotion as in PyTorch, pow at 0, NaN through softmax and attention, empty axes, quiet floats."""

import warnings

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F


# ----- iteration and indexing -----
def test_iteration_over_the_first_axis():
    values = [t.item() for t in ta.Tensor([1.0, 2.0])]
    assert values == [1.0, 2.0]
    rows = list(ta.Tensor(np.arange(6.0).reshape(3, 2)))
    assert [r.shape for r in rows] == [(2,)] * 3
    np.testing.assert_array_equal(rows[2].data, [4.0, 5.0])
    assert len(ta.Tensor(np.zeros((4, 2)))) == 4


def test_iterated_rows_are_differentiable():
    x = ta.Tensor([1.0, 2.0, 3.0], requires_grad=True)
    total = None
    for i, xi in enumerate(x):
        total = xi * (i + 1) if total is None else total + xi * (i + 1)
    total.backward()
    np.testing.assert_allclose(x.grad, [1.0, 2.0, 3.0])


def test_zero_d_tensor_is_not_iterable_and_has_no_len():
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(ta.Tensor(1.0))
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(ta.Tensor(1.0))


def test_out_of_range_index_is_an_index_error_and_a_shape_error():
    t = ta.Tensor([1.0, 2.0])
    for index in (2, -3, (0, 0)):
        with pytest.raises(IndexError, match=r"getitem: index .* does not fit shape \(2,\)"):
            t[index]
    with pytest.raises(ta.ShapeError):
        t[5]


# ----- gradients are owned, writable arrays -----
def test_leaves_do_not_share_the_seed_or_each_other():
    a = ta.Tensor([1.0, 2.0], requires_grad=True)
    b = ta.Tensor([3.0, 4.0], requires_grad=True)
    g = np.array([1.0, -1.0], dtype=np.float32)
    (a + b).backward(g)
    assert a.grad is not b.grad and a.grad is not g and b.grad is not g
    a.grad *= 2
    np.testing.assert_array_equal(b.grad, [1.0, -1.0])
    np.testing.assert_array_equal(g, [1.0, -1.0])


def test_a_broadcast_gradient_is_writable():
    x = ta.Tensor(np.ones((2, 3)), requires_grad=True)
    x.sum().backward()
    x.grad *= 2
    np.testing.assert_array_equal(x.grad, np.full((2, 3), 2.0))


def test_a_node_gradient_is_not_a_leaf_gradient():
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    y = x + 0.0
    y.backward(np.array([1.0, 1.0], dtype=np.float32))
    x.grad += 1
    np.testing.assert_array_equal(y.node.grad, [1.0, 1.0])   # the drawing's value is untouched


# ----- dtype promotion of scalars (PyTorch's rule) -----
@pytest.mark.parametrize("scalar", [2.0, 2, np.float64(2), np.int64(2), np.array(2.0), np.float16(2)])
def test_scalars_keep_a_float_tensors_dtype(scalar):
    t = ta.Tensor([1.0])
    for result in (t * scalar, scalar * t, t + scalar, t - scalar, t / scalar, t ** scalar):
        assert result.dtype == np.float32
    assert (ta.Tensor(np.array([1.0])) * scalar).dtype == np.float64


def test_a_scalar_keeps_float64_exactly():
    t = ta.Tensor(np.array([1.0]))
    assert (t * 0.7).item() == 0.7


def test_integer_tensor_with_a_float():
    ids = ta.Tensor([1, 2])
    assert (ids * 2.5).dtype == np.float32
    np.testing.assert_array_equal((ids * 2.5).data, [2.5, 5.0])
    assert (ids * ta.Tensor(np.array([0.5, 1.0]))).dtype == np.float64  # the float tensor's dtype
    assert (ta.Tensor(np.array([1, 2], dtype=np.int32)) * 3).dtype == np.int32


def test_arrays_with_dims_promote_as_numpy():
    assert (ta.Tensor([1.0]) * np.array([2.0])).dtype == np.float64


# ----- pow at 0 -----
def test_pow_zero_exponent_at_zero_has_gradient_zero():
    x = ta.Tensor([0.0, 2.0], requires_grad=True)
    (x ** 0).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])


def test_pow_tensor_exponent_at_zero_base():
    y = ta.Tensor([0.0, 0.0, 2.0], requires_grad=True)
    e = ta.Tensor([2.0, 0.0, 3.0], requires_grad=True)
    (y ** e).sum().backward()
    # d(y^e)/dy = e·y^(e−1): 0, 0 (e = 0), 3·4; d(y^e)/de = y^e·ln y: 0, 0 at y = 0, 8 ln 2
    np.testing.assert_allclose(y.grad, [0.0, 0.0, 12.0])
    np.testing.assert_allclose(e.grad, [0.0, 0.0, 8 * np.log(2)], rtol=1e-6)


# ----- NaN through softmax and attention, masked rows -----
def test_nan_spreads_over_its_softmax_row_only():
    x = ta.Tensor([[np.nan, 1.0], [0.0, 0.0]])
    assert np.isnan(F.softmax(x).data[0]).all()
    np.testing.assert_allclose(F.softmax(x).data[1], [0.5, 0.5])
    assert np.isnan(F.log_softmax(x).data[0]).all()
    np.testing.assert_allclose(F.log_softmax(x).data[1], [np.log(0.5)] * 2, rtol=1e-6)


def test_nan_in_a_float_mask_and_fully_masked_rows():
    x = ta.Tensor(np.zeros((3, 2)), requires_grad=True)
    bias = np.array([[np.nan, 0.0], [-np.inf, -np.inf], [0.0, 0.0]])
    p = F.softmax(x, mask=bias)
    assert np.isnan(p.data[0]).all()
    np.testing.assert_array_equal(p.data[1:], [[0.0, 0.0], [0.5, 0.5]])
    (p[1:] * ta.Tensor(np.array([[1.0, 2.0], [3.0, 5.0]]))).sum().backward()
    np.testing.assert_array_equal(x.grad[1], [0.0, 0.0])             # the masked row: zero gradient


@pytest.mark.parametrize("attention", [F.scaled_dot_product_attention, F.flash_attention])
def test_nan_score_row_in_attention_is_nan(attention):
    q = ta.Tensor(np.array([[np.nan, 0.0], [1.0, 0.0]]), requires_grad=True)
    k = ta.Tensor(np.ones((3, 2)), requires_grad=True)
    v = ta.Tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    out = attention(q, k, v)
    assert np.isnan(out.data[0]).all()
    np.testing.assert_allclose(out.data[1], [2.0, 3.0])
    out.backward(np.ones((2, 2)))
    assert np.isnan(q.grad[0]).all() and np.isnan(v.grad).all()


# ----- empty axes -----
def test_softmax_over_an_empty_axis_is_empty():
    x = ta.Tensor(np.zeros((3, 0)), requires_grad=True)
    for fn in (F.softmax, F.log_softmax):
        y = fn(x, axis=1)
        assert y.shape == (3, 0)
        y.backward(np.zeros((3, 0)))
        assert x.grad.shape == (3, 0)


@pytest.mark.parametrize("attention", [F.scaled_dot_product_attention, F.flash_attention])
def test_attention_with_no_keys_gives_zeros(attention):
    q = ta.Tensor(np.ones((2, 3)), requires_grad=True)
    k = ta.Tensor(np.zeros((0, 3)), requires_grad=True)
    v = ta.Tensor(np.zeros((0, 4)), requires_grad=True)
    out = attention(q, k, v)
    np.testing.assert_array_equal(out.data, np.zeros((2, 4)))
    out.backward(np.ones((2, 4)))
    np.testing.assert_array_equal(q.grad, np.zeros((2, 3)))
    assert k.grad.shape == (0, 3) and v.grad.shape == (0, 4)


def test_max_over_an_empty_axis_is_a_shape_error():
    with pytest.raises(ta.ShapeError, match=r"max: cannot take the maximum over an empty axis "
                                            r"\(axis 1 of shape \(2, 0\)\)"):
        ta.Tensor(np.zeros((2, 0))).max(axis=1)
    with pytest.raises(ta.ShapeError, match="max: cannot take the maximum over an empty axis"):
        ta.Tensor(np.zeros(0)).max()
    empty_rows = ta.Tensor(np.zeros((0, 2))).max(axis=1)             # empty rows, not an empty axis
    assert empty_rows.values.shape == empty_rows.indices.shape == (0,)
    assert ta.Tensor(np.zeros((0, 2))).amax(axis=1).shape == (0,)


# ----- no RuntimeWarning from ops; detect_anomaly still reports -----
@pytest.mark.parametrize("build, expected", [
    (lambda x: (x * 1000.0).exp(), np.inf),
    (lambda x: (x - 1.0).log(), -np.inf),
    (lambda x: x / (x - 1.0), np.inf),
    (lambda x: (x - 2.0).sqrt(), np.nan),
    (lambda x: (x - 1.0) ** -1.0, np.inf),
    (lambda x: x[:0].mean(), np.nan),
], ids=["exp overflow", "log 0", "divide by 0", "sqrt of negative", "pow 0^-1", "mean of empty"])
def test_ops_give_inf_or_nan_quietly_and_anomaly_mode_reports_them(build, expected):
    x = ta.Tensor([1.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = build(x)
        y.sum().backward()
    np.testing.assert_array_equal(y.data.reshape(-1)[:1], [expected])
    with ta.detect_anomaly(), pytest.raises(ta.AnomalyError, match="holds NaN or Inf"):
        build(x)


def test_ops_keep_the_callers_other_float_error_settings_and_restore_them():
    x = ta.Tensor([-1000.0, 0.0])
    before = np.geterr()
    with np.errstate(under="raise"), pytest.raises(FloatingPointError, match="underflow"):
        x.exp()                     # exp(−1000) underflows, and the caller asked that to raise
    assert np.geterr() == before
    np.testing.assert_array_equal(x.exp().data, [0.0, 1.0])     # NumPy's default: underflow ignored
    assert np.geterr() == before
