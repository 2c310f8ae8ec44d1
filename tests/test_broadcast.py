"""Broadcasting gradients are summed back to each input's shape, for random shapes."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import tinygrad_attn as ta
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
