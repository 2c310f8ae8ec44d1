"""A 0-d tensor takes dim 0 or −1 (or a tuple of one) wherever PyTorch lets it, as if it had one
axis, with PyTorch's result: its one element (index 0), its dtype, shape (); other dims are refused.
Written out below, so the test needs no torch, and asked of torch where it is installed."""

import warnings

import numpy as np
import pytest

import tinygrad_attn as ta

NAN = float("nan")
X = 3.0

# (call, value PyTorch gives for tensor(3.0)); "index" marks an int64 index result
ACCEPTED = [
    ("sum(0)", X), ("sum(-1, keepdim=True)", X), ("sum((0,))", X), ("sum(())", X),
    ("mean(0)", X), ("mean((-1,), keepdim=True)", X), ("prod(0)", X), ("prod(-1, keepdim=True)", X),
    ("amax(0)", X), ("amin((-1,))", X), ("logsumexp(0)", X), ("logsumexp(-1, keepdim=True)", X),
    ("var(0)", NAN), ("var(0, correction=0)", 0.0), ("std(-1, keepdim=True)", NAN),
    ("std((0,), correction=0)", 0.0),
    ("max(0).values", X), ("max(-1, keepdim=True).indices", 0), ("min(0).values", X), ("min(-1).indices", 0),
    ("argmax(0)", 0), ("argmin(-1, keepdim=True)", 0), ("argmax(keepdim=True)", 0),
    ("squeeze(0)", X), ("squeeze((-1,))", X), ("flip(0)", X), ("flip(())", X),
    ("topk(1, 0).values", X), ("topk(1).indices", 0), ("topk(0).values", X),     # k = 0 too, as PyTorch
    ("transpose(0, -1)", X), ("swapaxes(-1, -1)", X), ("cumsum(0)", X), ("sort(-1).values", X),
    ("all(0)", True), ("any((-1,), keepdim=True)", True),
]

REFUSED = ["sum(1)", "sum((0, -1))", "mean(-2)", "amax((0, 0))", "max(1)", "argmax(1)", "var(2)",
           "squeeze(1)", "flip((0, -1))", "topk(2)", "topk(1, 1)", "transpose(0, 1)", "flatten(1)", "all(1)",
           "any((0, -1))", "logsumexp(-2)", "min(-2)"]


def _call(x, call):
    return eval(f"x.{call}")            # noqa: S307 (the calls are the literals above)


@pytest.mark.parametrize("call, expected", ACCEPTED, ids=[c for c, _ in ACCEPTED])
def test_dim_0_or_minus_1_of_a_0d_tensor_is_pytorchs(call, expected):
    out = _call(ta.Tensor(np.array(X)), call)
    assert out.shape == ()
    np.testing.assert_array_equal(out.numpy(), expected)
    kind = "b" if isinstance(expected, bool) else "i" if isinstance(expected, int) else "f"
    assert out.dtype.kind == kind
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                     # var's "degrees of freedom ≤ 0"
        theirs = _call(torch.tensor(X, dtype=torch.float64), call)
    assert tuple(theirs.shape) == ()
    np.testing.assert_array_equal(out.numpy(), theirs.numpy())


@pytest.mark.parametrize("call", REFUSED)
def test_other_dims_of_a_0d_tensor_are_refused_naming_the_op(call):
    name = call.split("(")[0]
    with pytest.raises(ta.ShapeError, match=rf"^{name}: (dims? .* (is out of range|repeat)|k = )"):
        _call(ta.Tensor(X), call)
    torch = pytest.importorskip("torch")
    with pytest.raises((IndexError, RuntimeError)):
        _call(torch.tensor(X), call)


def test_bool_all_and_any_of_a_0d_tensor():
    assert ta.Tensor(False).all(0).item() is False and ta.Tensor(True).any(-1, keepdim=True).item() is True


@pytest.mark.parametrize("build", [
    lambda x: x.sum(0) * 2, lambda x: x.mean(-1), lambda x: x.prod((0,)), lambda x: x.amax(0),
    lambda x: x.max(-1).values, lambda x: x.min(0, keepdim=True).values, lambda x: x.logsumexp(0),
    lambda x: x.squeeze(0), lambda x: x.flip(-1), lambda x: x.topk(1, 0).values, lambda x: x.transpose(0, -1),
    lambda x: x.flatten(0, -1), lambda x: x.scatter_add(0, ta.Tensor(0), x * 3),
    lambda x: x.var(0, correction=0),
])
def test_gradients_through_dim_0_of_a_0d_tensor(build):
    x = ta.Tensor(np.array(0.7), requires_grad=True)
    assert ta.gradcheck(build, [x])


def test_scatter_add_on_a_0d_tensor_as_pytorch():
    out = ta.Tensor(3.0).scatter_add(-1, ta.Tensor(0), ta.Tensor(1.5))
    assert out.shape == () and out.item() == 4.5
    torch = pytest.importorskip("torch")
    assert torch.tensor(3.0).scatter_add(-1, torch.tensor(0), torch.tensor(1.5)).item() == 4.5


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "var", "std"])
def test_an_empty_tuple_of_dims_reduces_every_axis_as_pytorch(name):
    x = np.array([[1.0, 4.0, 2.0], [0.5, 3.0, 8.0]])
    expected = {"sum": x.sum(), "mean": x.mean(), "amax": x.max(), "amin": x.min(), "var": x.var(ddof=1),
                "std": x.std(ddof=1)}[name]
    out = getattr(ta.Tensor(x), name)(())
    assert out.shape == () and out.item() == pytest.approx(expected, rel=1e-12)
    torch = pytest.importorskip("torch")
    assert getattr(torch.tensor(x), name)(()).item() == pytest.approx(expected, rel=1e-12)


def test_any_all_and_flip_over_no_dims_change_nothing_as_pytorch():
    x = ta.Tensor(np.array([[True, False], [False, False]]))
    np.testing.assert_array_equal(x.any(()).numpy(), x.numpy())
    np.testing.assert_array_equal(ta.arange(4).flip(()).numpy(), [0, 1, 2, 3])
