"""Bad input raises a clear error naming the op and the shapes, before anything changes."""

import numpy as np
import pytest

import tinygrad_attn as ta


@pytest.mark.parametrize("build,pattern", [
    (lambda a, b: a + b, r"^add: shapes \(3, 4\) and \(5,\) do not broadcast$"),
    (lambda a, b: a * b, r"^mul: shapes \(3, 4\) and \(5,\) do not broadcast$"),
    (lambda a, b: a @ b, r"matmul: shapes \(3, 4\) and \(5,\) do not fit"),
    (lambda a, b: a.reshape(5, 3), r"reshape: cannot reshape \(3, 4\)"),
    (lambda a, b: a.sum(axis=2), r"sum: axis 2 is out of range"),
    (lambda a, b: a.permute(0, 0), r"permute: axes \(0, 0\)"),
    (lambda a, b: a[5], r"getitem: index .* does not fit shape \(3, 4\)"),
    (lambda a, b: a.split([1, 1]), r"split: sizes \[1, 1\] do not add up to 3"),
    (lambda a, b: a.masked_fill(np.ones(5, bool), 0.0),
     r"masked_fill: shapes of mask \(5,\) and x \(3, 4\) do not broadcast"),
    (lambda a, b: ta.concat([a, b]), r"concat: shapes"),
    (lambda a, b: ta.stack([a, b]), r"stack: all shapes must be equal"),
    (lambda a, b: ta.where(np.ones(5, bool), a, a),
     r"^where: shapes \(5,\), \(3, 4\) and \(3, 4\) do not broadcast$"),
])
def test_shape_errors_name_op_and_shapes_and_change_nothing(build, pattern):
    a = ta.Tensor(np.ones((3, 4)), requires_grad=True)
    b = ta.Tensor(np.ones(5), requires_grad=True)
    a.grad = np.full((3, 4), 2.0)
    before = a.data.copy()
    with pytest.raises(ta.ShapeError, match=pattern):
        build(a, b)
    assert isinstance(ta.ShapeError("x"), ValueError)
    np.testing.assert_array_equal(a.data, before)
    np.testing.assert_array_equal(a.grad, np.full((3, 4), 2.0))
    assert b.grad is None


def test_mask_must_be_boolean():
    with pytest.raises(TypeError, match="mask must be boolean"):
        ta.Tensor([1.0, 2.0]).masked_fill(np.array([1.0, 0.0]), 0.0)


class _LooksLikeCupy(np.ndarray):
    """A NumPy array that reports CuPy as its module, to test the device check without a GPU."""

    __module__ = "cupy._stand_in"


def test_mixed_devices_raise_before_any_work():
    a = ta.Tensor(np.ones(3), requires_grad=True)
    b = ta.Tensor._from_op(np.ones(3).view(_LooksLikeCupy), None, None)
    assert b.device == "cuda"
    with pytest.raises(ta.DeviceError, match=r"add: inputs are on different devices \(cpu, cuda\)"):
        a + b
    assert a.grad is None


def test_matmul_and_masked_fill_word_broadcast_errors_as_every_op_does():
    with pytest.raises(ta.ShapeError,
                       match=r"^matmul: batch dims of a \(2,\) and b \(3,\) do not broadcast$"):
        ta.randn(2, 3, 4) @ ta.randn(3, 4, 5)
    with pytest.raises(ta.ShapeError,
                       match=r"^masked_fill: shapes of mask \(4,\) and x \(2, 3\) do not broadcast$"):
        ta.randn(2, 3).masked_fill(np.ones(4, dtype=bool), 0.0)
