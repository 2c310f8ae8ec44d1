"""Broadcasting gradients are summed back to each input's shape, for random shapes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.backend import to_numpy
from tinygrad_attn.engine import unbroadcast

SHAPES = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3)


def reduce_like_numpy(grad, shape):
    """The reference: sum the gradient over every axis where `shape` was broadcast."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis, n in enumerate(shape):
        if n == 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad


@settings(max_examples=60, deadline=None)
@given(SHAPES, st.integers(0, 2**31 - 1))
def test_mul_gradients_for_broadcast_shapes(shapes, seed):
    rng = np.random.default_rng(seed)
    (shape_a, shape_b), out_shape = shapes.input_shapes, shapes.result_shape
    a, b, g = rng.standard_normal(shape_a), rng.standard_normal(shape_b), rng.standard_normal(out_shape)
    ta_a, ta_b = ta.Tensor(a, requires_grad=True), ta.Tensor(b, requires_grad=True)
    (ta_a * ta_b).backward(g)
    np.testing.assert_allclose(ta_a.grad, reduce_like_numpy(g * b, shape_a))
    np.testing.assert_allclose(ta_b.grad, reduce_like_numpy(g * a, shape_b))
    assert ta_a.grad.shape == shape_a and ta_b.grad.shape == shape_b


@settings(max_examples=40, deadline=None)
@given(SHAPES, st.integers(0, 2**31 - 1))
def test_gradcheck_on_broadcast_shapes(shapes, seed):
    rng = np.random.default_rng(seed)
    a, b = (ta.Tensor(rng.standard_normal(s) + 3.0, requires_grad=True) for s in shapes.input_shapes)
    assert ta.gradcheck(lambda x, y: (x - y) / (x * y) + x ** 2, [a, b])


@settings(max_examples=60, deadline=None)
@given(SHAPES, st.integers(0, 2**31 - 1))
def test_unbroadcast_matches_reference(shapes, seed):
    g = np.random.default_rng(seed).standard_normal(shapes.result_shape)
    for shape in shapes.input_shapes:
        np.testing.assert_allclose(unbroadcast(g, shape), reduce_like_numpy(g, shape))


@pytest.mark.parametrize("grad_shape, shape", [((2, 40, 3), (3,)), ((70, 1, 4), (1, 4)), ((64, 5), (5,)),
                                               ((128, 2, 3), (2, 3)), ((63, 4), (4,))])
def test_sums_over_many_leading_rows_match_numpy_on_both_devices(grad_shape, shape, device):
    """From 64 rows the engine sums leading axes as 1ᵀ G (kernels.reductions.colsum), below that with
    NumPy's sum; both must give the reference sums, on the GPU stand-in too."""
    g = np.random.default_rng(7).standard_normal(grad_shape)
    x = ta.Tensor(np.ones(shape), requires_grad=True, device=device)
    (x * ta.Tensor(np.ones(grad_shape), device=device)).backward(ta.Tensor(g, device=device))
    assert x.grad.shape == shape
    np.testing.assert_allclose(to_numpy(x.grad), reduce_like_numpy(g, shape), rtol=1e-12)


def test_linear_bias_gradient_over_many_rows_is_the_column_sum(device):
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((4, 25, 3)), rng.standard_normal((3, 2)), rng.standard_normal(2)
    g = rng.standard_normal((4, 25, 2))                 # 100 rows: the bias gradient is 1ᵀ G
    tb = ta.Tensor(b, requires_grad=True, device=device)
    out = F.linear(ta.Tensor(x, device=device), ta.Tensor(w, device=device), tb)
    out.backward(ta.Tensor(g, device=device))
    np.testing.assert_allclose(to_numpy(tb.grad), g.reshape(100, 2).sum(axis=0), rtol=1e-12)
