"""Bad input to tensors and ops gets a clear error: dtypes a tensor cannot hold, axes out of range
or of the wrong type, integer attention inputs; and gradcheck reports the user's gradient."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.ops.elementwise import Mul
from tinygrad_attn.tensor import apply


@pytest.mark.parametrize("data, dtype_name", [
    ([1 + 2j, 3.0], "complex128"),
    (np.array([1, 2], dtype=np.complex64), "complex64"),
    (["a", "b"], "<U1"),
    (np.array([b"ab"]), "|S2"),
    ([object(), 1], "object"),
    (np.array([1.0], dtype=object), "object"),
])
def test_dtypes_a_tensor_cannot_hold_are_refused(data, dtype_name):
    with pytest.raises(TypeError, match=f"Tensor: cannot hold dtype {dtype_name.replace('|', '[|]')};"):
        ta.Tensor(data)


def test_a_dtype_argument_that_cannot_be_held_is_refused():
    with pytest.raises(TypeError, match="Tensor: cannot hold dtype complex128"):
        ta.Tensor([1.0], dtype=np.complex128)


@pytest.mark.parametrize("data", [[[1.0, 2.0], [3.0]], [1.0, [2.0, 3.0]]])
def test_ragged_data_is_refused(data):
    with pytest.raises(TypeError, match=r"Tensor: ragged data \(nested lists of different lengths\)"):
        ta.Tensor(data)


def test_bool_and_integer_data_stay_allowed():
    assert ta.Tensor([True, False]).dtype == np.bool_
    assert ta.Tensor([1, 2]).dtype == np.int64
    assert ta.Tensor(np.array([1], dtype=np.uint8)).dtype == np.uint8


# ----- axes -----
@pytest.mark.parametrize("build, message", [
    (lambda t: t.transpose(1, 2), r"transpose: axes \(1, 2\) are out of range for a tensor with 2 dims"),
    (lambda t: t.transpose(0, 2), r"transpose: axes \(0, 2\) are out of range for a tensor with 2 dims"),
    (lambda t: t.transpose(0), r"transpose: axes \(0,\) are not a permutation for shape \(2, 3\)"),
    (lambda t: t.swapaxes(0, 2), r"swapaxes: axis 2 is out of range for a tensor with 2 dims"),
    (lambda t: t.sum(axis=(0, -2)), r"sum: axes \(0, -2\) repeat an axis"),
    (lambda t: t.split(1, axis=-3), r"split: axis -3 is out of range for a tensor with 2 dims"),
    (lambda t: F.softmax(t, axis=2), r"softmax: axis 2 is out of range for a tensor with 2 dims"),
    (lambda t: ta.concat([t, t], axis=2), r"concat: axis 2 is out of range for a tensor with 2 dims"),
    (lambda t: ta.stack([t, t], axis=-4), r"stack: axis -4 is out of range for a tensor with 3 dims"),
])
def test_axes_out_of_range_are_shape_errors(build, message):
    with pytest.raises(ta.ShapeError, match=f"^{message}$"):
        build(ta.Tensor(np.zeros((2, 3))))


@pytest.mark.parametrize("build, message", [
    (lambda t: t.sum(axis=0), r"sum: axis 0 is out of range for a tensor with 0 dims"),
    (lambda t: t.mean(axis=-1), r"mean: axis -1 is out of range for a tensor with 0 dims"),
    (lambda t: t.transpose(0), r"transpose: axes \(0,\) are out of range for a tensor with 0 dims"),
    (lambda t: t.swapaxes(0, 0), r"swapaxes: axis 0 is out of range for a tensor with 0 dims"),
    (lambda t: F.log_softmax(t, axis=0), r"log_softmax: axis 0 is out of range for a tensor with 0 dims"),
])
def test_zero_d_tensors_have_no_axis(build, message):
    with pytest.raises(ta.ShapeError, match=f"^{message}$"):
        build(ta.Tensor(3.0))


def test_zero_d_tensors_answer_as_numpy_without_an_axis():
    t = ta.Tensor(3.0)
    assert t.sum().item() == 3.0 and t.transpose().item() == 3.0 and t.T is t
    assert t.sum(axis=()).item() == 3.0


def test_swapaxes_of_one_axis_is_the_identity_and_numpy_integers_are_ints():
    x = np.arange(6.0).reshape(2, 3)
    t = ta.Tensor(x)
    np.testing.assert_array_equal(t.swapaxes(1, 1).data, x)
    np.testing.assert_array_equal(t.sum(axis=np.int64(1)).data, x.sum(axis=1))
    np.testing.assert_array_equal(t.transpose(np.int32(1), np.int64(0)).data, x.T)
    np.testing.assert_array_equal(t.swapaxes(np.int64(0), -1).data, x.T)
    np.testing.assert_array_equal(F.softmax(t, axis=np.int64(0)).data, F.softmax(t, axis=0).data)


@pytest.mark.parametrize("axis", [1.0, "1", True, (0, 1.5)])
def test_axes_that_are_not_integers_are_type_errors(axis):
    with pytest.raises(TypeError, match=r"^sum: axis must be an int"):
        ta.Tensor(np.zeros((2, 3))).sum(axis=axis)


# ----- attention dtypes -----
@pytest.mark.parametrize("attention", [F.scaled_dot_product_attention, F.flash_attention])
@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_attention_refuses_integer_inputs(attention, which):
    args = {name: ta.Tensor(np.ones((2, 3))) for name in "qkv"}
    args[which] = ta.Tensor(np.ones((2, 3), dtype=np.int64))
    name = attention.__name__
    with pytest.raises(TypeError, match=f"^{name}: {which} must be a float tensor, got dtype int64$"):
        attention(args["q"], args["k"], args["v"])


# ----- gradcheck reports the user's gradient -----
class _ThreeQuarterMul(Mul):
    """a·b whose backward is ¾ of the true one: for x·x at x = 3, analytic 4.5 against numeric 6.0."""

    name = "three_quarter_mul"

    @staticmethod
    def backward(ctx, grad):
        return tuple(0.75 * g for g in Mul.backward(ctx, grad))


def test_gradcheck_of_a_scalar_output_reports_its_gradient():
    x = ta.Tensor([3.0], requires_grad=True)
    with pytest.raises(ta.GradcheckError) as info:
        ta.gradcheck(lambda t: apply(_ThreeQuarterMul, t, t).sum(), [x])
    message = str(info.value)
    assert "worst element (0,) has analytic 4.5, numeric 6.0 (the gradient of the output;" in message


def test_gradcheck_of_a_vector_output_says_the_values_are_of_the_projection():
    x = ta.Tensor([3.0, 1.0], requires_grad=True)
    with pytest.raises(ta.GradcheckError, match=r"gradients of ⟨v, f\(x\)⟩ for a random cotangent v"):
        ta.gradcheck(lambda t: apply(_ThreeQuarterMul, t, t), [x])
