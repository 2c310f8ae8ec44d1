"""Tensor construction, dtype and device rules, constructors and conversions."""

import numpy as np
import pytest

import tinygrad_attn as ta


def test_python_floats_become_the_default_float_dtype():
    assert ta.Tensor(1.5).dtype == np.float32
    assert ta.Tensor([[1.0, 2.0]]).dtype == np.float32
    ta.set_default_dtype(np.float64)
    try:
        assert ta.Tensor([1.0]).dtype == np.float64
        assert ta.zeros(2).dtype == np.float64
    finally:
        ta.set_default_dtype(np.float32)
    with pytest.raises(ValueError, match="float32 or float64"):
        ta.set_default_dtype(np.int32)


def test_arrays_keep_their_dtype_and_integers_stay_integers():
    assert ta.Tensor(np.zeros(3)).dtype == np.float64
    assert ta.Tensor([1, 2, 3]).dtype.kind == "i"
    assert ta.arange(5).dtype.kind == "i"
    assert ta.Tensor([1, 2], dtype=np.float64).dtype == np.float64
    with pytest.raises(TypeError, match="only float tensors can require grad"):
        ta.Tensor([1, 2], requires_grad=True)


def test_python_numbers_take_the_tensor_dtype():
    x = ta.Tensor([1.0, 2.0])
    assert (x * 2).dtype == np.float32
    assert (2.5 - x).dtype == np.float32
    assert (x ** 2).dtype == np.float32
    np.testing.assert_allclose((1.0 / x).data, [1.0, 0.5])


def test_numpy_on_the_left_defers_to_tensor():
    out = np.array([1.0, 2.0]) * ta.Tensor([3.0, 4.0], requires_grad=True)
    assert isinstance(out, ta.Tensor)
    np.testing.assert_allclose(out.data, [3.0, 8.0])


def test_attributes_and_conversions():
    x = ta.Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = (x * x).sum()
    assert x.is_leaf and x.op is None and not y.is_leaf and y.op == "sum"
    assert x.shape == (2, 2) and x.ndim == 2 and x.device == "cpu"
    assert y.item() == pytest.approx(30.0)
    copy = x.numpy()
    copy[0, 0] = 100.0
    assert x.data[0, 0] == 1.0
    d = y.detach()
    assert d.is_leaf and not d.requires_grad
    assert x.to("cpu") is x
    y.backward()
    assert x.grad is not None
    x.zero_grad()
    assert x.grad is None
    with pytest.raises(ValueError, match="has 4 elements"):
        x.item()


def test_constructors_and_seed():
    ta.manual_seed(7)
    a = ta.randn(2, 3)
    ta.manual_seed(7)
    b = ta.randn((2, 3))
    np.testing.assert_array_equal(a.data, b.data)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(ta.ones(2, 2).data, np.ones((2, 2)))
    np.testing.assert_array_equal(ta.arange(1, 7, 2).data, [1, 3, 5])
    assert ta.tensor([1.0], requires_grad=True).requires_grad
    assert ta.zeros(3, requires_grad=True).requires_grad


def test_cuda_without_cupy_is_a_clear_error():
    if ta.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ta.DeviceError, match="cuda"):
        ta.Tensor([1.0], device="cuda")
    with pytest.raises(ta.DeviceError, match="unknown device 'tpu'"):
        ta.Tensor([1.0], device="tpu")


def test_where_concat_stack(rng):
    a = ta.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    b = ta.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    cond = np.array([[True, False, True]])
    np.testing.assert_allclose(ta.where(cond, a, b).data, np.where(cond, a.data, b.data))
    np.testing.assert_allclose(ta.where(cond, a, 0.0).data, np.where(cond, a.data, 0.0))
    np.testing.assert_allclose(ta.concat([a, b], axis=1).data, np.concatenate([a.data, b.data], 1))
    np.testing.assert_allclose(ta.stack([a, b], axis=-1).data, np.stack([a.data, b.data], -1))
    masked = a.masked_fill(cond, -1.0)
    np.testing.assert_allclose(masked.data, np.where(cond, -1.0, a.data))
