"""Bad input to tensors and ops gets a clear error: dtypes a tensor cannot hold, axes out of range
or of the wrong type, integer attention inputs; and gradcheck reports the user's gradient."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.apply import apply
from tinygrad_attn.ops.arithmetic import Mul


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
    (lambda t: t.transpose(1, 2), r"transpose: axis 2 is out of range for a tensor with 2 dims"),
    (lambda t: t.transpose(-3, 0), r"transpose: axis -3 is out of range for a tensor with 2 dims"),
    (lambda t: t.transpose(0), r"transpose: takes two dims to swap \(or a permutation of all 2\), got "
                               r"\(0,\) for shape \(2, 3\)"),
    (lambda t: t.permute(0, 2), r"permute: axes \(0, 2\) are out of range for a tensor with 2 dims"),
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
    (lambda t: t.sum(axis=1), r"sum: dim 1 is out of range for a 0-d tensor \(0 or -1 only\)"),
    (lambda t: t.mean(axis=-2), r"mean: dim -2 is out of range for a 0-d tensor \(0 or -1 only\)"),
    (lambda t: t.transpose(0, 1), r"transpose: dim 1 is out of range for a 0-d tensor \(0 or -1 only\)"),
    (lambda t: t.swapaxes(2, 0), r"swapaxes: dim 2 is out of range for a 0-d tensor \(0 or -1 only\)"),
    (lambda t: F.log_softmax(t, axis=1),
     r"log_softmax: dim 1 is out of range for a 0-d tensor \(0 or -1 only\)"),
])
def test_zero_d_tensors_take_dim_0_or_minus_1_only(build, message):     # tests/ops/test_zero_d_dims.py
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


@pytest.mark.parametrize("name, call", [("softmax", lambda t: F.softmax(t, None)),
                                        ("cumsum", lambda t: t.cumsum(None)),
                                        ("unsqueeze", lambda t: t.unsqueeze(None))])
def test_a_one_axis_argument_of_none_is_a_type_error_naming_the_op(name, call):
    """None means every axis to a reduction; where one axis is needed it is refused by name."""
    with pytest.raises(TypeError, match=rf"^{name}: axis must be one int, got None$"):
        call(ta.Tensor(np.zeros((2, 3))))


@pytest.mark.parametrize("split_size", [True, 2.5, "2", [2, 1.5]])
def test_split_sizes_that_are_not_ints_are_type_errors(split_size):
    with pytest.raises(TypeError, match=r"^split: split_size must be an int \(each piece's size\) or a "
                                        r"sequence of ints \(the sizes\), got "):
        ta.Tensor(np.zeros((4, 3))).split(split_size)


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
    with pytest.raises(ta.GradcheckError, match=r"gradients of ⟨c, f\(x\)⟩ for a random cotangent c"):
        ta.gradcheck(lambda t: apply(_ThreeQuarterMul, t, t), [x])


# ----- inputs that once failed silently on the tensor side -----
@pytest.mark.parametrize("setting, value, message", [
    ("eps", float("nan"), "eps must be a finite number > 0, got nan"),
    ("eps", 0.0, "eps must be a finite number > 0, got 0.0"),
    ("eps", -1e-6, "eps must be a finite number > 0, got -1e-06"),
    ("eps", float("inf"), "eps must be a finite number > 0, got inf"),
    ("atol", float("nan"), "atol must be a finite number >= 0, got nan"),
    ("atol", -1.0, "atol must be a finite number >= 0, got -1.0"),
    ("rtol", float("nan"), "rtol must be a finite number >= 0, got nan"),
    ("rtol", float("inf"), "rtol must be a finite number >= 0, got inf"),
    ("rtol", "0.1", "rtol must be a finite number >= 0, got '0.1'"),
])
def test_gradcheck_refuses_settings_that_would_pass_a_wrong_backward(setting, value, message):
    x = ta.Tensor([3.0, 1.0], requires_grad=True)
    wrong = lambda t: apply(_ThreeQuarterMul, t, t)             # noqa: E731
    with pytest.raises(ta.GradcheckError):
        ta.gradcheck(wrong, [x])
    with pytest.raises(ValueError, match=f"^gradcheck: {message}$"):
        ta.gradcheck(wrong, [x], **{setting: value})


def test_gradcheck_with_zero_tolerances_is_an_exact_comparison():
    x = ta.Tensor([3.0], requires_grad=True)
    with pytest.raises(ta.GradcheckError):
        ta.gradcheck(lambda t: t * 2.0, [x], atol=0.0, rtol=0.0)          # rounding differs
    assert ta.gradcheck(lambda t: t * 2.0, [x], atol=1e-8, rtol=0.0)


def test_index_arrays_edited_after_forward_move_no_gradient():
    """The ids a lookup used are the ids its backward scatters to, whatever happens to the
    caller's array or tensor afterwards (the weight gradient was silently wrong)."""
    def weight_grads(edit):
        emb = ta.nn.Embedding(5, 2)
        ids = ta.Tensor(np.array([[0, 3], [3, 1]]))
        index = np.array([4, 0, 4])
        x = ta.Tensor(np.arange(10.0).reshape(5, 2), requires_grad=True)
        cot = np.arange(4.0).reshape(2, 2, 1) + 1
        y = (emb(ids) * cot).sum() + (x[index] * np.array([[1.0], [2.0], [3.0]])).sum()
        if edit:
            ids.data[0, 0], index[:] = 4, 2
        y.backward()
        return emb.weight.grad, x.grad

    ta.manual_seed(0)
    emb_clean, x_clean = weight_grads(edit=False)
    ta.manual_seed(0)
    emb_edited, x_edited = weight_grads(edit=True)
    np.testing.assert_array_equal(emb_edited, emb_clean)
    np.testing.assert_array_equal(emb_clean[:, 0], [1.0, 4.0, 0.0, 5.0, 0.0])       # ids 0, 3, 3, 1
    np.testing.assert_array_equal(x_edited, x_clean)
    np.testing.assert_array_equal(x_clean[:, 0], [2.0, 0.0, 0.0, 0.0, 4.0])         # rows 4, 0, 4


@pytest.mark.parametrize("mask", [np.array(True), np.array([True, False, True]),
                                  np.array([[1.0, 0.0, -2.0]])])
def test_flash_attention_takes_masks_of_fewer_than_two_dims_as_plain_attention(mask, device):
    rng = np.random.default_rng(0)
    q, k, v = (ta.Tensor(rng.standard_normal((2, 3, 4)), requires_grad=True, device=device) for _ in range(3))
    plain = F.scaled_dot_product_attention(q, k, v, mask=mask)
    flash = F.flash_attention(q, k, v, mask=mask, block_size=2)
    np.testing.assert_allclose(flash.numpy(), plain.numpy(), atol=1e-12)
    assert ta.gradcheck(lambda a, b, c: F.flash_attention(a, b, c, mask=mask, block_size=2), [q, k, v])


@pytest.mark.parametrize("attention", [F.scaled_dot_product_attention, F.flash_attention])
def test_attention_with_key_size_zero_returns_the_empty_or_uniform_result(attention):
    """d_k = 0: every score is an empty sum, 0, so each query averages the values (no
    ZeroDivisionError from 1/√0); with d_v = 0 too the result has shape (…, 0), as in PyTorch."""
    empty = ta.Tensor(np.zeros((2, 3, 0)), requires_grad=True)
    assert attention(empty, empty, empty).shape == (2, 3, 0)
    q, k = ta.Tensor(np.zeros((2, 3, 0)), requires_grad=True), ta.Tensor(np.zeros((2, 4, 0)))
    v = ta.Tensor(np.arange(16.0).reshape(2, 4, 2), requires_grad=True)
    out = attention(q, k, v)
    np.testing.assert_allclose(out.data, np.broadcast_to(v.data.mean(axis=1, keepdims=True), (2, 3, 2)))
    assert ta.gradcheck(lambda a: attention(q, k, a), [v])


@pytest.mark.parametrize("build, message", [
    (lambda s: F.layer_norm(s), r"layer_norm: x of shape \(\) has no axis to normalise over; it needs at "
                                r"least 1 dim"),
    (lambda s: ta.nn.LayerNorm(1)(s), r"layer_norm: x of shape \(\) has no axis"),
    (lambda s: F.linear(s, ta.ones(1, 2)), r"linear: x of shape \(\) does not fit weight of shape \(1, 2\)"),
    (lambda s: ta.nn.Linear(1, 2)(s), r"linear: x of shape \(\) does not fit weight of shape \(1, 2\)"),
])
def test_layer_norm_and_linear_of_a_zero_d_tensor_are_shape_errors(build, message):
    with pytest.raises(ta.ShapeError, match=message):
        build(ta.Tensor(2.0, requires_grad=True))


def test_an_empty_list_index_selects_nothing_as_in_numpy():
    x = ta.Tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    y = x[[]]
    assert y.shape == np.arange(6.0).reshape(3, 2)[[]].shape == (0, 2)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, np.zeros((3, 2)))


def test_a_preset_grad_of_another_shape_is_refused_not_broadcast():
    x = ta.Tensor(np.ones((3, 3)), requires_grad=True)
    with pytest.raises(ta.ShapeError, match=r"^grad: the gradient of a tensor of shape \(3, 3\) must be an "
                                            r"array of that shape, got shape \(3, 1\)$"):
        x.grad = np.zeros((3, 1))
    with pytest.raises(ta.ShapeError, match=r"must be an array of that shape, got float$"):
        x.grad = 0.5
    assert x.grad is None
    x.grad = np.full((3, 3), 2.0)                       # the right shape accumulates
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad, np.full((3, 3), 5.0))


def test_a_longdouble_tensor_of_any_size_is_fingerprinted_and_edits_are_caught():
    x = ta.Tensor(np.linspace(-1, 1, 4200).astype(np.longdouble), requires_grad=True)   # > 64 KiB
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * x.data)
    y = (x * x).sum()
    x.data[3] += 1
    with pytest.raises(RuntimeError, match=r"mul: input 0 \(leaf\) of shape \(4200,\) was changed in place"):
        y.backward()


def test_adam_moves_a_parameter_whose_float32_gradient_is_1e20_by_lr_as_pytorch():
    """v = (1 − β₂) g² ≈ 1e37 fits in float32 but v / (1 − β₂) overflowed: the update was lr · m̂ / inf
    = 0 with an overflow warning. Bias-correcting √v instead gives PyTorch's step, lr."""
    import warnings

    p = ta.Tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    opt = ta.optim.Adam([p], lr=0.1)
    p.grad = np.full(3, 1e20, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
    np.testing.assert_allclose(p.data, 0.9, rtol=1e-6)      # torch.optim.Adam gives 0.9 here


def test_anomaly_mode_accepts_the_documented_minus_inf_of_masking():
    keep = np.array([[True, False, True], [False, False, False]])
    x = ta.Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    with ta.detect_anomaly():
        log_p = F.log_softmax(x, mask=keep)
        filled = x.masked_fill(~keep, -np.inf)
        moved = filled.T.reshape(3, 2)                               # −inf carried on by moves
        p = F.softmax(moved.T, mask=keep)
        (log_p.masked_fill(~keep, 0.0) + p).sum().backward()
    assert log_p.data[0, 1] == -np.inf and filled.data[0, 1] == -np.inf
    assert np.isfinite(x.grad).all()


@pytest.mark.parametrize("build, op", [
    (lambda x, m: x.masked_fill(m, np.nan), "masked_fill"),
    (lambda x, m: x.masked_fill(m, np.inf), "masked_fill"),
    (lambda x, m: x.log(), "log"),
    (lambda x, m: x.masked_fill(m, -np.inf) * 2.0, "mul"),           # −inf used in arithmetic
])
def test_anomaly_mode_still_reports_nan_inf_and_minus_inf_outside_masking(build, op):
    x = ta.Tensor(np.array([[0.0, 1.0], [2.0, 3.0]]), requires_grad=True)
    with ta.detect_anomaly(), pytest.raises(ta.AnomalyError, match=f"^{op}: forward output"):
        build(x, np.array([[True, False], [False, False]]))
