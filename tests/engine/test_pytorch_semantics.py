"""One rule: a PyTorch name means what it means in PyTorch. Each case gives the values PyTorch gives
(written out, so the test needs no torch), and where torch is installed also asks it."""

import itertools
from pathlib import Path

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn.commands.ops import ONE_RULE

ROOT = Path(__file__).resolve().parents[2]
NAN = float("nan")


def test_the_rule_is_said_where_a_learner_looks_first():
    assert ONE_RULE in (ROOT / "docs" / "README.md").read_text()
    assert ONE_RULE in (ROOT / "docs" / "ops.md").read_text()


# ----- sort and topk: no negation, NaN as the largest, stable ties -----
@pytest.mark.parametrize("data, dtype, descending, values, indices", [
    ([0, 5, 200], np.uint8, True, [200, 5, 0], [2, 1, 0]),                      # −x wraps around in uint8
    ([3, -2**63, 7], np.int64, True, [7, 3, -2**63], [2, 0, 1]),                 # −(−2⁶³) overflows
    ([3, -2**63, 7], np.int64, False, [-2**63, 3, 7], [1, 0, 2]),
    ([True, False, True, False], np.bool_, True, [True, True, False, False], [0, 2, 1, 3]),
    ([1.0, NAN, 3.0], np.float32, True, [NAN, 3.0, 1.0], [1, 2, 0]),            # NaN first descending
    ([1.0, NAN, 3.0], np.float32, False, [1.0, 3.0, NAN], [0, 2, 1]),           # and last ascending
    ([2.0, 1.0, 2.0, 1.0, 2.0], np.float64, True, [2.0, 2.0, 2.0, 1.0, 1.0], [0, 2, 4, 1, 3]),
    ([2.0, 1.0, 2.0, 1.0, 2.0], np.float64, False, [1.0, 1.0, 2.0, 2.0, 2.0], [1, 3, 0, 2, 4]),
])
def test_sort_as_pytorch(data, dtype, descending, values, indices):
    x = ta.Tensor(np.array(data, dtype=dtype))
    out = x.sort(descending=descending, stable=True)
    np.testing.assert_array_equal(out.values.numpy(), np.array(values, dtype=dtype))
    np.testing.assert_array_equal(out.indices.numpy(), indices)
    assert out.values.dtype == dtype and out.indices.dtype == np.int64
    torch = pytest.importorskip("torch")
    expected = torch.tensor(np.array(data, dtype=dtype)).sort(descending=descending, stable=True)
    np.testing.assert_array_equal(out.values.numpy(), expected.values.numpy())
    np.testing.assert_array_equal(out.indices.numpy(), expected.indices.numpy())


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_without_dim_refuse_keepdim_as_pytorch(name):
    x = ta.Tensor([[1.0, 5.0], [3.0, -2.0]])
    with pytest.raises(TypeError, match=rf"^{name}: keepdim=True needs a dim \(without one, {name}\(\) is "):
        getattr(x, name)(keepdim=True)
    extreme = {"max": 5.0, "min": -2.0}[name]
    assert getattr(x, name)().item() == extreme                                # a value, as before
    assert getattr(x, name)(keepdims=False).shape == ()
    np.testing.assert_array_equal(getattr(x, f"a{name}")(keepdim=True).numpy(), [[extreme]])
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        getattr(torch.tensor(x.numpy()), name)(keepdim=True)


def test_topk_takes_sorted_and_puts_nan_first_as_pytorch():
    x = ta.Tensor([1.0, NAN, 3.0])
    top = x.topk(1)
    assert np.isnan(top.values.item()) and top.indices.item() == 1           # max gives nan too
    assert np.isnan(x.max().item())
    low = x.topk(2, largest=False, sorted=True)
    np.testing.assert_array_equal(low.values.numpy(), [1.0, 3.0])
    small = ta.Tensor(np.array([0, 5, 200], np.uint8))
    np.testing.assert_array_equal(small.topk(2, sorted=False).values.numpy(), [200, 5])
    rows = ta.Tensor([[4.0, 9.0, 1.0], [7.0, 2.0, 8.0]], requires_grad=True)
    values, indices = rows.topk(2, dim=1)
    np.testing.assert_array_equal(values.numpy(), [[9.0, 4.0], [8.0, 7.0]])
    values.backward(np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(rows.grad, [[2.0, 1.0, 0.0], [4.0, 0.0, 3.0]])
    assert rows.topk(1, axis=0).indices.numpy().tolist() == [[1, 0, 1]]


# ----- var and std: correction=1 by default, divided by max(0, n − correction) -----
def test_var_and_std_default_to_the_unbiased_estimate():
    x = ta.Tensor([[1.0, 2.0, 4.0], [0.0, 0.0, 3.0]])
    np.testing.assert_allclose(x.var(1).numpy(), [7 / 3, 3.0], rtol=1e-6)     # Σ(x − μ)² / (n − 1)
    np.testing.assert_allclose(x.var(1, correction=0).numpy(), [14 / 9, 2.0], rtol=1e-6)
    np.testing.assert_allclose(x.std(dim=1, keepdim=True).numpy(), [[(7 / 3) ** 0.5], [3 ** 0.5]], rtol=1e-6)
    np.testing.assert_allclose(x.var().item(), np.var([1, 2, 4, 0, 0, 3], ddof=1), rtol=1e-6)


@pytest.mark.parametrize("build, expected", [
    (lambda: ta.zeros(1, 0).var(1, correction=1), [NAN]),         # 0/0 (ours was −0.0)
    (lambda: ta.Tensor([5.0]).var(), NAN),                         # one element, n − 1 = 0
    (lambda: ta.Tensor([1.0, 2.0]).var(correction=2), np.inf),    # 0.5 / max(0, 0)
    (lambda: ta.Tensor([1.0, 2.0]).var(correction=3), np.inf),    # never a negative divisor
    (lambda: ta.Tensor([1.0, 2.0]).std(correction=5), np.inf),
])
def test_correction_at_or_past_n_gives_nan_or_inf_as_pytorch(build, expected):
    np.testing.assert_array_equal(build().numpy(), np.array(expected, dtype=np.float32))


# ----- split and chunk -----
def test_split_takes_the_size_of_each_piece_and_chunk_the_number():
    x = ta.Tensor(np.arange(12.0).reshape(2, 6))
    assert [p.shape for p in x.split(2, 1)] == [(2, 2)] * 3                   # NumPy's meaning gave 2 of 3
    assert [p.shape for p in x.split(4, dim=1)] == [(2, 4), (2, 2)]
    assert [p.shape for p in x.split([1, 5], axis=1)] == [(2, 1), (2, 5)]
    assert [p.shape for p in x.chunk(4, 1)] == [(2, 2)] * 3                   # ⌈6/4⌉ = 2: three pieces
    np.testing.assert_array_equal(x.split(np.int64(5), 1)[1].numpy(), [[5.0], [11.0]])
    assert [p.shape for p in ta.zeros(0, 3).split(2)] == [(0, 3)]             # one empty piece, as PyTorch
    with pytest.raises(ValueError, match=r"^split: split_size must be a positive int \(each piece's size\), "
                                         r"got 0$"):
        x.split(0, 1)


# ----- both spellings -----
@pytest.mark.parametrize("torch_style, numpy_style", [
    (lambda x: x.sum(dim=1, keepdim=True), lambda x: x.sum(axis=1, keepdims=True)),
    (lambda x: x.mean(dim=0), lambda x: x.mean(axis=0)),
    (lambda x: x.amax(dim=(0, 1)), lambda x: x.amax(axis=(0, 1))),
    (lambda x: x.max(dim=1, keepdim=True).values, lambda x: x.max(axis=1, keepdims=True)[0]),
    (lambda x: x.var(dim=1, keepdim=True), lambda x: x.var(axis=1, keepdims=True)),
    (lambda x: x.logsumexp(dim=1), lambda x: x.logsumexp(axis=1)),
    (lambda x: x.cumsum(dim=0), lambda x: x.cumsum(axis=0)),
    (lambda x: x.flip(dims=1), lambda x: x.flip(axis=1)),
    (lambda x: x.roll(1, dims=0), lambda x: x.roll(1, axis=0)),
    (lambda x: x.unsqueeze(dim=0), lambda x: x.unsqueeze(axis=0)),
    (lambda x: x.diagonal(dim1=1, dim2=0), lambda x: x.diagonal(axis1=1, axis2=0)),
    (lambda x: ta.concat([x, x], dim=1), lambda x: ta.concat([x, x], axis=1)),
    (lambda x: ta.stack([x, x], dim=2), lambda x: ta.stack([x, x], axis=2)),
    (lambda x: ta.functional.softmax(x, dim=0), lambda x: ta.functional.softmax(x, axis=0)),
])
def test_dim_and_axis_keepdim_and_keepdims_are_one_argument(torch_style, numpy_style):
    x = ta.Tensor(np.arange(6.0).reshape(2, 3) ** 1.5)
    a, b = torch_style(x), numpy_style(x)
    assert a.shape == b.shape
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_both_spellings_at_once_are_refused():
    with pytest.raises(TypeError, match=r"^sum: got both dim= and axis= \(the same argument in PyTorch's and "
                                        r"NumPy's spelling\); give one$"):
        ta.ones(2, 3).sum(dim=0, axis=1)
    with pytest.raises(TypeError, match=r"^mean: got both keepdim= and keepdims="):
        ta.ones(2, 3).mean(0, keepdim=True, keepdims=True)


# ----- wrong answers that are now PyTorch's -----
def test_clamp_of_ints_with_float_bounds_is_float():
    out = ta.arange(5).clamp(0.5, 2.5)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.numpy(), [0.5, 1.0, 2.0, 2.5, 2.5])           # was [0 1 2 2 2] int64
    assert ta.arange(5).clamp(1, 3).dtype == np.int64                            # int bounds keep ints


def test_hardswish_gradient_at_the_kinks_is_pytorchs():
    x = ta.Tensor([-3.0, 3.0, -3.5, 3.5, 0.0], requires_grad=True)
    ta.functional.hardswish(x).backward(np.array([1.0, 1.0, 1.0, 1.0, 2.0]))
    np.testing.assert_array_equal(x.grad, [0.0, 1.0, 0.0, 1.0, 1.0])             # was −0.5 and 1.5 at ±3


@pytest.mark.parametrize("shape, bias_shape, expected", [((4096, 2), (2,), 4096),
                                                         ((64, 64, 4), (1, 1, 4), 4096)])
def test_float16_broadcast_gradients_add_in_float32(shape, bias_shape, expected):
    b = ta.zeros(*bias_shape, dtype=np.float16, requires_grad=True)
    (ta.ones(*shape, dtype=np.float16) + b).sum().backward()
    assert b.grad.dtype == np.float16
    np.testing.assert_array_equal(b.grad, np.full(bias_shape, expected, np.float16))   # was 2048


def test_float16_std_is_finite_and_has_its_gradient():
    x = ta.Tensor(np.array([300.0, -300.0, 0.0], np.float16), requires_grad=True)
    y = x.std()
    assert y.dtype == np.float16 and y.item() == 300.0                            # was inf
    y.backward()
    np.testing.assert_array_equal(x.grad, np.array([0.5, -0.5, 0.0], np.float16))   # (x − μ)/((n − 1) y)


def test_roll_without_dims_rolls_the_flattened_tensor_and_linspace_refuses_bool():
    np.testing.assert_array_equal(ta.arange(6).reshape(2, 3).roll(1).numpy(), [[5, 0, 1], [2, 3, 4]])
    np.testing.assert_array_equal(ta.arange(6).reshape(2, 3).roll(-2).numpy(), [[2, 3, 4], [5, 0, 1]])
    np.testing.assert_array_equal(ta.arange(5).roll((1,)).numpy(), [4, 0, 1, 2, 3])        # a tuple of one
    np.testing.assert_array_equal(ta.arange(5).roll([np.int64(-1)]).numpy(), [1, 2, 3, 4, 0])
    np.testing.assert_array_equal(ta.arange(4).reshape(2, 2).roll((1, np.int64(1)), (0, 1)).numpy(),
                                  [[3, 2], [1, 0]])
    with pytest.raises(ValueError, match=r"^roll: without dims, shifts must be one int .*got \(1, 2\)$"):
        ta.arange(5).roll((1, 2))
    with pytest.raises(TypeError, match=r"^roll: shifts must be ints, got 1.5$"):
        ta.arange(5).roll(1.5)
    with pytest.raises(TypeError, match=r"^linspace: dtype bool is not supported"):
        ta.linspace(0, 1, 3, dtype=bool)


# ----- raw errors turned into clear ones (bad inputs), or PyTorch's answer -----
_Q = np.random.default_rng(0).standard_normal((1, 2, 3, 4))
F = ta.functional
NO_HEADS = ta.zeros(1, 0, 3, 4)
BAD_INPUTS = [
    (lambda: F.scaled_dot_product_attention(ta.Tensor(_Q), NO_HEADS, NO_HEADS, enable_gqa=True),
     ta.ShapeError, r"^scaled_dot_product_attention: enable_gqa needs .* the same Hkv ≥ 1 and Hq divisible"),
    (lambda: F.flash_attention(ta.Tensor(_Q), NO_HEADS, NO_HEADS, enable_gqa=True),
     ta.ShapeError, r"^flash_attention: enable_gqa needs .* the same Hkv ≥ 1"),
    (lambda: F.rms_norm(ta.Tensor(3.0)), ta.ShapeError,
     r"^rms_norm: x of shape \(\) has no axis to normalise over; it needs at least 1 dim$"),
    (lambda: ta.arange(0, 5, 0), ValueError, r"^arange: step must be nonzero, got 0$"),
    (lambda: ta.arange(3).repeat_interleave(ta.Tensor(np.ones((3, 1), np.int64))), TypeError,
     r"^repeat_interleave: a repeats tensor must be 0-d or 1-D of integers, got shape \(3, 1\) dtype int64$"),
    (lambda: ta.arange(3).repeat_interleave(1.5), TypeError,
     r"^repeat_interleave: repeats must be ints \(or a 0-d or 1-D integer tensor\), got 1.5$"),
    (lambda: ta.arange(3).repeat_interleave([1.0, 2.0, 1.0]), TypeError,
     r"^repeat_interleave: repeats must be ints"),
    (lambda: F.flash_attention(ta.Tensor(_Q), ta.Tensor(_Q), ta.Tensor(_Q), block_size=2.5), TypeError,
     r"^flash_attention: block_size must be an int \(keys per block\), got 2.5$"),
    (lambda: ta.arange(3).pad((1, 1), value=float("inf")), ValueError,
     r"^pad: value inf does not fit a tensor of dtype int64$"),
    (lambda: ta.arange(3).pad((True, 1)), ValueError, r"^pad: expected pairs of ints, at most two per axis"),
    (lambda: ta.Tensor(3.0).sort(1), ta.ShapeError,
     r"^sort: dim 1 is out of range for a 0-d tensor \(0 or -1 only\)$"),
    (lambda: ta.Tensor(3.0).cumsum(-2), ta.ShapeError, r"^cumsum: dim -2 is out of range for a 0-d tensor"),
    (lambda: F.softmax(ta.Tensor(3.0), 1), ta.ShapeError, r"^softmax: dim 1 is out of range for a 0-d"),
    (lambda: ta.Tensor(3.0).gather(2, ta.Tensor(0)), ta.ShapeError,
     r"^gather: dim 2 is out of range for a 0-d"),
]


@pytest.mark.parametrize("build, error, message", BAD_INPUTS)
def test_bad_inputs_get_clear_errors(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_pytorchs_answers_where_we_raised():
    np.testing.assert_array_equal(ta.zeros(2, 0).logsumexp(1).numpy(), [-np.inf, -np.inf])   # log of Σ = 0
    np.testing.assert_array_equal(ta.arange(3).pad((np.int64(1), 1)).numpy(), [0, 0, 1, 2, 0])
    np.testing.assert_array_equal(ta.arange(3).repeat_interleave(np.int64(2)).numpy(), [0, 0, 1, 1, 2, 2])
    x = ta.Tensor(3.0, requires_grad=True)
    sorted_ = x.sort()
    assert sorted_.values.shape == () and sorted_.values.item() == 3.0 and sorted_.indices.item() == 0
    assert x.cumsum(0).item() == 3.0 and x.gather(-1, ta.Tensor(0)).item() == 3.0
    assert ta.functional.softmax(x, 0).item() == 1.0 and ta.functional.log_softmax(x, -1).item() == 0.0
    (x.cumsum(0) * 2 + x.gather(0, ta.Tensor(0)) * 3).backward()
    assert x.grad == 5.0


# ----- class weights, PyTorch's third argument -----
def test_nll_loss_and_cross_entropy_take_class_weights_third():
    z = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 2.0], [0.3, 0.3, 0.3], [2.0, 1.0, 0.0]])
    t, w = np.array([1, 2, -100, 0]), np.array([0.5, 2.0, 4.0])
    log_p = z - np.log(np.exp(z).sum(1, keepdims=True))
    picked, wt = -log_p[[0, 1, 3], [1, 2, 0]], w[[1, 2, 0]]
    expected = (wt * picked).sum() / wt.sum()                              # PyTorch's weighted mean
    x = ta.Tensor(z, requires_grad=True)
    loss = ta.functional.cross_entropy(x, t, w, ignore_index=-100)
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    loss.backward()
    p = np.exp(log_p)
    one_hot = np.eye(3)[[1, 2, 0, 0]]
    dx = (p - one_hot) * np.array([2.0, 4.0, 0.0, 0.5])[:, None] / wt.sum()
    np.testing.assert_allclose(x.grad, dx, rtol=1e-12, atol=1e-15)
    nll = ta.functional.nll_loss(ta.Tensor(log_p), t, ta.Tensor(w))           # ignore_index −100 by default
    assert nll.item() == pytest.approx(expected, rel=1e-12)
    sums = ta.functional.nll_loss(ta.Tensor(log_p), t, w, reduction="none").numpy()
    np.testing.assert_allclose(sums, [wt[0] * picked[0], wt[1] * picked[1], 0, wt[2] * picked[2]], rtol=1e-12)
    torch = pytest.importorskip("torch")
    reference = torch.nn.functional.nll_loss(torch.tensor(log_p), torch.tensor(t), torch.tensor(w))
    assert nll.item() == pytest.approx(reference.item(), rel=1e-12)


def test_cross_entropy_ignores_minus_100_by_default_as_pytorch_and_nll_loss():
    z = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 2.0], [0.3, 0.2, 0.1]])
    t = np.array([1, -100, 2])
    log_p = z - np.log(np.exp(z).sum(1, keepdims=True))
    expected = -(log_p[0, 1] + log_p[2, 2]) / 2                           # the mean over the two that count
    assert F.cross_entropy(ta.Tensor(z), t).item() == pytest.approx(expected, rel=1e-12)
    assert F.nll_loss(ta.Tensor(log_p), t).item() == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match=r"^cross_entropy: target -100 is out of range for 3 classes$"):
        F.cross_entropy(ta.Tensor(z), t, ignore_index=None)                 # None: every target counts
    torch = pytest.importorskip("torch")
    assert torch.nn.functional.cross_entropy(torch.tensor(z), torch.tensor(t)).item() == pytest.approx(
        expected, rel=1e-12)


@pytest.mark.parametrize("build, error, message", [
    (lambda: ta.functional.nll_loss(ta.zeros(2, 3), [0, 1], [1.0, 2.0]), ta.ShapeError,
     r"^nll_loss: weight must be \(3,\) floats, one per class of input \(2, 3\), got float32 \(2,\)$"),
    (lambda: ta.functional.cross_entropy(ta.zeros(2, 3), [0, 1], [1, 2, 3]), ta.ShapeError,
     r"^cross_entropy: weight must be \(3,\) floats"),
    (lambda: ta.functional.cross_entropy(ta.zeros(2, 3), [0, 1], [1.0, 2.0, 3.0], label_smoothing=0.1),
     ValueError, r"^cross_entropy: weight with label_smoothing is not supported"),
    (lambda: ta.functional.cross_entropy(ta.zeros(2, 3), ta.ones(2, 3) / 3, [1.0, 2.0, 3.0]),
     ValueError, r"^cross_entropy: weight applies to integer targets, not to class probabilities$"),
])
def test_bad_class_weights(build, error, message):
    with pytest.raises(error, match=message):
        build()


# ----- one promotion rule, PyTorch's (dtypes.promoted_dtype), tested as a table -----
def _t(dtype, shape=(3,)):
    return ta.Tensor(np.ones(shape, dtype=dtype))


PROMOTION_TABLE = [   # (what, build, dtype PyTorch gives)
    ("int64 + float32", lambda: _t(np.int64) + _t(np.float32), np.float32),
    ("float32 + 0-d float64", lambda: _t(np.float32) + _t(np.float64, ()), np.float32),
    ("0-d float64 + 0-d float32", lambda: _t(np.float64, ()) + _t(np.float32, ()), np.float64),
    ("float16 + float32", lambda: _t(np.float16) + _t(np.float32), np.float32),
    ("int8 + uint8", lambda: _t(np.int8) + _t(np.uint8), np.int16),
    ("bool + int64", lambda: _t(np.bool_) + _t(np.int64), np.int64),
    ("int64 + 0-d float64", lambda: _t(np.int64) + _t(np.float64, ()), np.float64),   # the float category
    ("int64 / int64", lambda: _t(np.int64) / _t(np.int64), np.float32),
    ("where(c, int64, float32)", lambda: ta.where(_t(np.bool_), _t(np.int64), _t(np.float32)), np.float32),
    ("concat(int64, float32)", lambda: ta.concat([_t(np.int64), _t(np.float32)]), np.float32),
    ("stack(int64, float32)", lambda: ta.stack([_t(np.int64), _t(np.float32)]), np.float32),
    ("float32 @ float64", lambda: _t(np.float32, (2, 3)) @ _t(np.float64, (3, 2)), np.float64),
]


@pytest.mark.parametrize("what, build, expected", PROMOTION_TABLE, ids=[row[0] for row in PROMOTION_TABLE])
def test_promotion_table(what, build, expected):
    assert build().dtype == expected, what


def test_promotion_table_is_pytorchs():
    torch = pytest.importorskip("torch")
    t = {np.int64: torch.int64, np.float32: torch.float32, np.float64: torch.float64,
         np.int8: torch.int8, np.uint8: torch.uint8, np.bool_: torch.bool}

    def tt(dtype, shape=(3,)):
        return torch.ones(shape, dtype=t[dtype])
    assert (tt(np.float32) + tt(np.float64, ())).dtype == torch.float32
    assert (tt(np.int8) + tt(np.uint8)).dtype == torch.int16
    assert torch.where(tt(np.bool_), tt(np.int64), tt(np.float32)).dtype == torch.float32
    assert torch.cat([tt(np.int64), tt(np.float32)]).dtype == torch.float32
    assert (tt(np.int64) + tt(np.float64, ())).dtype == torch.float64


def test_a_promoted_operand_keeps_its_gradient_and_int_matmul_float_is_refused():
    x = ta.Tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    s = ta.Tensor(np.float64(3.0), requires_grad=True)
    y = x * s
    assert y.dtype == np.float32
    y.backward(np.array([1.0, 10.0], np.float32))
    assert s.grad.dtype == np.float64 and s.grad == 21.0                      # 1·1 + 10·2, through the cast
    np.testing.assert_array_equal(x.grad, [3.0, 30.0])
    with pytest.raises(TypeError, match=r"^matmul: operands of dtypes int64 and float32: an integer and a "
                                        r"float matrix do not multiply \(as PyTorch\)"):
        ta.arange(6).reshape(2, 3) @ ta.ones(3, 2)


# ----- F.pad's modes: copies of the tensor's own elements, negative widths crop -----
@pytest.mark.parametrize("mode, pad, values", [
    ("reflect", (2, 1), [2, 1, 0, 1, 2, 3, 2]),
    ("replicate", (2, 1), [0, 0, 0, 1, 2, 3, 3]),
    ("circular", (2, 1), [2, 3, 0, 1, 2, 3, 0]),
    ("constant", (-1, 2), [1, 2, 3, 0, 0]),
    ("circular", (-1, 2), [1, 2, 3, 1, 2]),                 # cropped first, then wrapped
    ("reflect", (1, -2), [1, 0, 1]),
    ("reflect", (3, -3), [3, 2, 1, 0]),                     # padded first, then cropped (PyTorch's order)
    ("reflect", (-4, 2), [2, 1]),
    ("replicate", (2, -5), [0]),
    ("replicate", (-5, 3), [3, 3]),
])
def test_pad_modes_as_pytorch(mode, pad, values):
    out = ta.functional.pad(ta.Tensor(np.arange(4.0).reshape(1, 4)), pad, mode)
    np.testing.assert_array_equal(out.numpy(), [values])


def test_a_copied_element_gets_every_copys_gradient():
    x = ta.Tensor(np.arange(4.0), requires_grad=True)
    y = ta.functional.pad(x, (2, 1), "replicate")                # [0, 0, 0, 1, 2, 3, 3]
    y.backward(np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]))
    np.testing.assert_array_equal(x.grad, [7.0, 8.0, 16.0, 96.0])
    z = ta.Tensor(np.arange(4.0), requires_grad=True)
    ta.functional.pad(z, (2, 1), "reflect").backward(np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]))
    np.testing.assert_array_equal(z.grad, [4.0, 10.0, 17.0 + 64.0, 32.0])   # [2, 1, 0, 1, 2, 3, 2]
    assert ta.gradcheck(lambda t: ta.functional.pad(t, (1, 2, 2, -1), "circular"),
                        [ta.Tensor(np.random.default_rng(3).standard_normal((3, 4)), requires_grad=True)])


@pytest.mark.parametrize("mode, pad, message", [
    ("reflect", (4, 0), r"^pad: reflect padding \(4, 0\) does not fit an axis of length 4"),
    ("circular", (0, 5), r"^pad: circular padding \(0, 5\) does not fit an axis of length 4"),
    ("wrap", (1, 1), r"^pad: mode must be one of \('constant', 'reflect', 'replicate', 'circular'\)"),
    ("constant", (-3, -2), r"^pad: negative widths \(-3, -2\) crop more than shape \(4,\) holds$"),
])
def test_bad_pads(mode, pad, message):
    with pytest.raises(ValueError, match=message):
        ta.functional.pad(ta.Tensor(np.arange(4.0)), pad, mode)


def test_reflect_and_replicate_pad_then_crop_as_pytorch():
    x = ta.Tensor(np.arange(5.0), requires_grad=True)
    y = ta.functional.pad(x, (3, -3), mode="reflect")
    np.testing.assert_array_equal(y.numpy(), [3, 2, 1, 0, 1])               # cropping first refused it
    y.backward(np.array([1.0, 2.0, 4.0, 8.0, 16.0]))
    np.testing.assert_array_equal(x.grad, [8.0, 20.0, 2.0, 1.0, 0.0])                 # x1 twice: 4 + 16
    assert ta.gradcheck(lambda t: ta.functional.pad(t, (2, -3, -1, 2), "replicate"),
                        [ta.Tensor(np.random.default_rng(5).standard_normal((3, 4)), requires_grad=True)])
    torch = pytest.importorskip("torch")
    for mode in ("reflect", "replicate"):
        for n in (1, 2, 3, 5):
            for pad in itertools.product(range(-6, 7), repeat=2):
                try:
                    theirs = torch.nn.functional.pad(torch.arange(float(n))[None], pad, mode=mode)[0].numpy()
                except RuntimeError:
                    continue                                        # PyTorch refuses: no comparison
                ours = ta.functional.pad(ta.Tensor(np.arange(float(n))), pad, mode=mode).numpy()
                np.testing.assert_array_equal(ours, theirs, err_msg=f"{mode} {pad} of length {n}")


def test_pad_modes_agree_with_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(4).standard_normal((2, 3, 5))
    for mode, pad in (("reflect", (2, 3, 1, 2)), ("replicate", (3, 1, 2, 0)), ("circular", (2, 5, -1, 2))):
        ours = ta.functional.pad(ta.Tensor(x), pad, mode).numpy()
        np.testing.assert_array_equal(ours, torch.nn.functional.pad(torch.tensor(x), pad, mode).numpy())
