"""The op surface a learner reaches for (PyTorch's names): forward values against NumPy written out,
results without gradient, the compositions gradient-checked, bad arguments named. The registered
ops' gradients are checked case by case in test_ops_gradcheck.py."""

import math

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F

X = np.array([[1.5, -2.0, 0.25, 3.0], [-0.5, 0.75, -1.25, 2.0], [0.1, -0.3, 4.0, -3.5]])
ERF = np.vectorize(math.erf)
SIGMOID = lambda a: 1 / (1 + np.exp(-a))            # noqa: E731
SOFTPLUS = lambda a: np.log1p(np.exp(a))            # noqa: E731

# name → (what the library computes on x, the same written in NumPy)
FORWARD = {
    "abs": (lambda x: x.abs(), np.abs),
    "sign": (lambda x: x.sign(), np.sign),
    "clip": (lambda x: x.clip(-1, 1), lambda a: np.clip(a, -1, 1)),
    "clamp min only": (lambda x: x.clamp(min=0.5), lambda a: np.maximum(a, 0.5)),
    "maximum": (lambda x: x.maximum(0.2), lambda a: np.maximum(a, 0.2)),
    "minimum": (lambda x: x.minimum(x.T.T * 0 + 0.2), lambda a: np.minimum(a, 0.2)),
    "rsqrt": (lambda x: x.abs().rsqrt(), lambda a: 1 / np.sqrt(np.abs(a))),
    "log2": (lambda x: x.abs().log2(), lambda a: np.log2(np.abs(a))),
    "exp2": (lambda x: x.exp2(), np.exp2),
    "sin": (lambda x: x.sin(), np.sin),
    "cos": (lambda x: x.cos(), np.cos),
    "erf": (lambda x: x.erf(), ERF),
    "floor": (lambda x: x.floor(), np.floor),
    "ceil": (lambda x: x.ceil(), np.ceil),
    "round": (lambda x: x.round(), np.round),
    "trunc": (lambda x: x.trunc(), np.trunc),
    "lerp": (lambda x: x.lerp(x * 2, 0.25), lambda a: a + 0.25 * a),
    "logaddexp": (lambda x: x.logaddexp(x * 0), lambda a: np.log(np.exp(a) + 1)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), lambda a: np.where(a > 0, a, 0.1 * a)),
    "elu": (lambda x: F.elu(x), lambda a: np.where(a > 0, a, np.exp(a) - 1)),
    "selu": (lambda x: F.selu(x), lambda a: 1.0507009873554805 * np.where(a > 0, a, 1.6732632423543772
                                                                          * (np.exp(a) - 1))),
    "celu": (lambda x: F.celu(x, 2.0), lambda a: np.maximum(a, 0) + np.minimum(0, 2 * (np.exp(a / 2) - 1))),
    "softplus": (lambda x: F.softplus(x), SOFTPLUS),
    "softplus beta": (lambda x: F.softplus(x, beta=2.0, threshold=3.0),
                      lambda a: np.where(2 * a > 3, a, SOFTPLUS(2 * a) / 2)),
    "softsign": (lambda x: F.softsign(x), lambda a: a / (1 + np.abs(a))),
    "logsigmoid": (lambda x: F.logsigmoid(x), lambda a: np.log(SIGMOID(a))),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 2.0), lambda a: np.clip(a, -0.5, 2.0)),
    "relu6": (lambda x: F.relu6(x * 3), lambda a: np.clip(3 * a, 0, 6)),
    "hardsigmoid": (lambda x: F.hardsigmoid(x * 2), lambda a: np.clip(2 * a / 6 + 0.5, 0, 1)),
    "hardswish": (lambda x: F.hardswish(x * 2), lambda a: 2 * a * np.clip(2 * a + 3, 0, 6) / 6),
    "mish": (lambda x: F.mish(x), lambda a: a * np.tanh(SOFTPLUS(a))),
    "min": (lambda x: x.min(axis=1).values, lambda a: a.min(axis=1)),
    "amin": (lambda x: x.amin(axis=1), lambda a: a.min(axis=1)),
    "amax": (lambda x: x.amax(dim=(0, 1)), lambda a: a.max()),
    "prod": (lambda x: x.prod(axis=0), lambda a: a.prod(axis=0)),
    "std": (lambda x: x.std(axis=1, correction=1), lambda a: a.std(axis=1, ddof=1)),
    "var": (lambda x: x.var(axis=0, correction=1), lambda a: a.var(axis=0, ddof=1)),
    "logsumexp": (lambda x: x.logsumexp(axis=1), lambda a: np.log(np.exp(a).sum(axis=1))),
    "cumsum": (lambda x: x.cumsum(1), lambda a: np.cumsum(a, 1)),
    "sum dtype": (lambda x: x.sum(axis=0, dtype=np.float64), lambda a: a.sum(axis=0)),
    "view": (lambda x: x.view(4, 3), lambda a: a.reshape(4, 3)),
    "squeeze": (lambda x: x.reshape(3, 1, 4).squeeze(), lambda a: a),
    "unsqueeze": (lambda x: x.unsqueeze(-1), lambda a: a[..., None]),
    "flatten": (lambda x: x.reshape(3, 2, 2).flatten(1), lambda a: a),
    "unflatten": (lambda x: x.unflatten(1, (2, -1)), lambda a: a.reshape(3, 2, 2)),
    "expand": (lambda x: x[:1].expand(2, -1, 4), lambda a: np.broadcast_to(a[:1], (2, 1, 4))),
    "flip": (lambda x: x.flip((0, 1)), lambda a: a[::-1, ::-1]),
    "repeat": (lambda x: x.repeat(2, 1, 2), lambda a: np.tile(a, (2, 1, 2))),
    "repeat_interleave": (lambda x: x.repeat_interleave([1, 0, 2], axis=0), lambda a: a[[0, 2, 2]]),
    "roll": (lambda x: x.roll((1, -1), (0, 1)), lambda a: np.roll(a, (1, -1), (0, 1))),
    "tril": (lambda x: x.tril(1), lambda a: np.tril(a, 1)),
    "triu": (lambda x: x.triu(-1), lambda a: np.triu(a, -1)),
    "diagonal": (lambda x: x.diagonal(1), lambda a: np.array([a[0, 1], a[1, 2], a[2, 3]])),
    "pad": (lambda x: F.pad(x, (1, 0, 0, 2), value=9.0),
            lambda a: np.pad(a, ((0, 2), (1, 0)), constant_values=9)),
    "gather": (lambda x: x.gather(1, [[3, 0], [1, 1]]),
               lambda a: np.array([[a[0, 3], a[0, 0]], [a[1, 1], a[1, 1]]])),
    "scatter_add": (lambda x: x.scatter_add(0, [[2, 2, 0, 1]], x[:1] * 10),
                    lambda a: a + np.array([[0, 0, 10 * a[0, 2], 0], [0, 0, 0, 10 * a[0, 3]],
                                            [10 * a[0, 0], 10 * a[0, 1], 0, 0]])),
}


@pytest.mark.parametrize("name", FORWARD)
def test_forward_matches_numpy(name):
    ours, reference = FORWARD[name]
    out = ours(ta.Tensor(X))
    np.testing.assert_allclose(out.numpy(), reference(X), rtol=1e-12, atol=1e-12, err_msg=name)


# compositions (their backward is the registered ops'), gradient-checked through a random cotangent
COMPOSED = {
    "std": lambda x: x.std(axis=1, correction=1),
    "chunk": lambda x: x.chunk(2, axis=1)[1],
    "squeeze/unsqueeze/flatten": lambda x: x.unsqueeze(0).flatten(1).squeeze(),
    "sort values": lambda x: x.sort(axis=1, descending=True)[0],
    "topk values": lambda x: x.topk(2, axis=0)[0],
    "selu": F.selu,
    "celu": lambda x: F.celu(x, 0.5),
    "relu6": lambda x: F.relu6(x * 2.5),
    "clip with tensor bounds": lambda x: x.clip(ta.Tensor(np.full(4, -1.0)), 1.0),
}


@pytest.mark.parametrize("name", COMPOSED)
def test_compositions_gradcheck(name):
    assert ta.gradcheck(COMPOSED[name], [ta.Tensor(X, requires_grad=True)])


def test_sort_and_topk_route_each_gradient_to_its_element():
    x = ta.Tensor([[3.0, 1.0, 2.0]], requires_grad=True)
    values, indices = x.topk(2)
    np.testing.assert_array_equal(values.numpy(), [[3.0, 2.0]])
    np.testing.assert_array_equal(indices.numpy(), [[0, 2]])
    values.backward(np.array([[10.0, 20.0]]))
    np.testing.assert_array_equal(x.grad, [[10.0, 0.0, 20.0]])
    values, indices = ta.Tensor([[3.0, 1.0, 2.0]]).sort()
    np.testing.assert_array_equal(indices.numpy(), [[1, 2, 0]])


def test_prod_gradient_with_zeros_is_the_product_of_the_others():
    x = ta.Tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0]], requires_grad=True)
    x.prod(axis=1).backward(np.ones(2))
    np.testing.assert_array_equal(x.grad, [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0]])


def test_ties_share_the_gradient():
    a, b = ta.Tensor([1.0, 2.0], requires_grad=True), ta.Tensor([1.0, 3.0], requires_grad=True)
    a.maximum(b).backward(np.array([4.0, 4.0]))
    np.testing.assert_array_equal(a.grad, [2.0, 0.0])
    np.testing.assert_array_equal(b.grad, [2.0, 4.0])
    x = ta.Tensor([1.0, -1.0, -1.0], requires_grad=True)
    x.min().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.5, 0.5])


def test_logsumexp_never_overflows_and_its_gradient_is_softmax():
    x = ta.Tensor([[1000.0, 1000.0], [-1e4, 0.0]], requires_grad=True, dtype=np.float64)
    np.testing.assert_allclose(x.logsumexp(axis=1).numpy(), [1000 + np.log(2), 0.0], atol=1e-12)
    x.logsumexp(axis=1).backward(np.array([1.0, 2.0]))
    np.testing.assert_allclose(x.grad, [[0.5, 0.5], [0.0, 2.0]], atol=1e-12)


@pytest.mark.parametrize("name,fn,dtype", [
    ("eq", lambda x: x == 0.25, np.bool_), ("ne", lambda x: x != x, np.bool_),
    ("lt", lambda x: x < 0, np.bool_), ("le", lambda x: x <= 0.25, np.bool_),
    ("gt", lambda x: x > 0, np.bool_), ("ge", lambda x: 0 >= x, np.bool_),
    ("isnan", lambda x: (x.log()).isnan(), np.bool_), ("isinf", lambda x: (x / 0).isinf(), np.bool_),
    ("isfinite", lambda x: x.isfinite(), np.bool_),
    ("logical", lambda x: (x > 0).logical_and(x < 2).logical_or((x > 3).logical_not()), np.bool_),
    ("argmax", lambda x: x.argmax(-1), np.int64), ("argmin", lambda x: x.argmin(0, keepdims=True), np.int64),
    ("any", lambda x: (x > 3.5).any(1), np.bool_), ("all", lambda x: (x > -5).all(), np.bool_),
    ("sort indices", lambda x: x.sort()[1], np.int64),
    ("one_hot", lambda x: F.one_hot((x > 0).sum(1), 5), np.int64),
])
def test_results_without_gradient_are_constants(name, fn, dtype, device):
    x = ta.Tensor(X, requires_grad=True, device=device)
    out = fn(x)
    assert out.dtype == dtype and not out.requires_grad and out.node is None and out.is_leaf, name


def test_comparison_and_test_values():
    x = ta.Tensor(X)
    np.testing.assert_array_equal((x > 0).numpy(), X > 0)
    np.testing.assert_array_equal((x == ta.Tensor(X[:1])).numpy(), X == X[:1])
    np.testing.assert_array_equal(x.argmax(-1).numpy(), X.argmax(-1))
    np.testing.assert_array_equal(x.argmin().numpy(), X.argmin())
    np.testing.assert_array_equal(F.one_hot(ta.Tensor([2, 0])).numpy(), [[0, 0, 1], [1, 0, 0]])
    np.testing.assert_array_equal(ta.Tensor([1.0, np.nan, np.inf]).isfinite().numpy(), [True, False, False])
    np.testing.assert_array_equal(((x > 0) & (x < 2) | ~(x > -1)).numpy(), (X > 0) & (X < 2) | ~(X > -1))
    np.testing.assert_array_equal(abs(x).numpy(), np.abs(X))
    np.testing.assert_array_equal((np.array([True, False, True]) & ta.Tensor([True, True, False])).numpy(),
                                  [True, False, False])
    with pytest.raises(TypeError, match="&: works on bool tensors"):
        ta.Tensor([1, 2]) & 1


def test_tensors_stay_hashable_and_truth_is_single_element():
    a, b = ta.Tensor([1.0, 2.0]), ta.Tensor([1.0, 2.0])
    assert len({a, b}) == 2 and a in {a: 1} and (a == b).all()
    assert (a == None) is False and (a != None) is True and None not in [a]     # noqa: E711
    assert bool(ta.Tensor([0.5]) > 0) and not ta.Tensor(0.0)
    with pytest.raises(RuntimeError, match=r"bool: the truth value of a tensor of shape \(2,\) is ambiguous"):
        bool(a == b)


def test_losses_against_their_formulas():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((4, 3))
    t = np.array([0, 2, 1, 2])
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    p, y = SIGMOID(z), rng.random((4, 3))
    assert F.nll_loss(ta.Tensor(logp), t).item() == pytest.approx(-logp[np.arange(4), t].mean())
    picked = logp[np.arange(4), t]
    assert F.nll_loss(ta.Tensor(logp), t, reduction="sum").item() == pytest.approx(-picked.sum())
    bce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert F.binary_cross_entropy(ta.Tensor(p), y).item() == pytest.approx(bce.mean())
    with_logits = F.binary_cross_entropy_with_logits(ta.Tensor(z), y, reduction="none")
    np.testing.assert_allclose(with_logits.numpy(), bce)
    assert F.mse_loss(ta.Tensor(z), ta.Tensor(y)).item() == pytest.approx(((z - y) ** 2).mean())
    smooth = (1 - 0.1) * np.eye(3)[t] + 0.1 / 3
    assert F.cross_entropy(ta.Tensor(z), t, label_smoothing=0.1).item() == \
        pytest.approx(-(smooth * logp).sum(-1).mean())
    probabilities = F.cross_entropy(ta.Tensor(z), ta.Tensor(smooth))
    assert probabilities.item() == pytest.approx(-(smooth * logp).sum(-1).mean())
    # each log clamped at −100, as PyTorch
    assert F.binary_cross_entropy(ta.Tensor([0.0, 1.0]), [1.0, 0.0]).item() == 100.0


def test_creation():
    ta.manual_seed(3)
    first = (ta.rand(2, 3).numpy(), ta.randint(5, (4,)).numpy(), ta.randint(2, 4, (3,)).numpy())
    ta.manual_seed(3)
    again = (ta.rand(2, 3).numpy(), ta.randint(5, (4,)).numpy(), ta.randint(2, 4, (3,)).numpy())
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert ((first[0] >= 0) & (first[0] < 1)).all() and first[0].dtype == np.float32
    assert set(first[1]) <= set(range(5)) and set(first[2]) <= {2, 3} and first[1].dtype == np.int64
    np.testing.assert_array_equal(ta.eye(2, 3).numpy(), np.eye(2, 3))
    np.testing.assert_allclose(ta.linspace(0, 1, 5).numpy(), [0, 0.25, 0.5, 0.75, 1])
    assert ta.full((2,), 7).dtype == np.int64 and ta.full((2,), 7.0).dtype == np.float32
    x = ta.Tensor(np.ones((2, 3), np.float16))
    assert ta.zeros_like(x).dtype == np.float16 and ta.ones_like(x).numpy().sum() == 6
    np.testing.assert_array_equal(ta.full_like(x, 2.5).numpy(), np.full((2, 3), 2.5))


@pytest.mark.parametrize("call,error,message", [
    (lambda x: x.gather(1, [[4]]), IndexError, r"gather: index 4 is out of range for axis 1 of shape"),
    (lambda x: x.gather(1, [[0], [1], [2], [0]]), ta.ShapeError, r"gather: index of shape \(4, 1\)"),
    (lambda x: x.gather(0, [[0.5]]), TypeError, "gather: index must be integers"),
    (lambda x: x.expand(3, 5), ta.ShapeError, r"expand: shape \(3, 4\) cannot be expanded to \(3, 5\)"),
    (lambda x: x.unflatten(1, (3, -1)), ta.ShapeError, r"unflatten: sizes \(3, -1\) do not make axis 1"),
    (lambda x: x.pad((1,)), ValueError, "pad: expected pairs of ints"),
    (lambda x: x.topk(5), ta.ShapeError, r"topk: k = 5 is out of range for axis 1"),
    (lambda x: x.repeat(2), ValueError, r"repeat: need one count ≥ 0 per axis of shape \(3, 4\)"),
    (lambda x: x.repeat_interleave([1, 2], axis=0), ValueError, "repeat_interleave: repeats"),
    (lambda x: x.clip(), ValueError, "clip: at least one of min and max"),
    (lambda x: x.diagonal(0, 1, -1), ta.ShapeError, "diagonal: dim1 and dim2 are the same axis 1"),
    (lambda x: x.unsqueeze(3), ta.ShapeError, "unsqueeze: axis 3 is out of range"),
    (lambda x: x.cumsum(2), ta.ShapeError, "cumsum: axis 2 is out of range"),
    (lambda x: x[0].tril(), ta.ShapeError, r"tril: needs at least 2 dims, got shape \(4,\)"),
    (lambda x: x > ta.Tensor([1.0, 2.0]), ta.ShapeError, "gt"),
    (lambda x: F.one_hot(ta.Tensor([3]), 2), ValueError, "one_hot: class 3 is out of range for 2 classes"),
    (lambda x: F.nll_loss(x, [0, 1]), ta.ShapeError, r"nll_loss: log_probs \(3, 4\) need integer targets"),
    (lambda x: F.mse_loss(x, x[0]), ta.ShapeError, r"mse_loss: target of shape \(4,\) does not match"),
    (lambda x: F.cross_entropy(x, [0, 1, 2], label_smoothing=2), ValueError, "label_smoothing must be in"),
    (lambda x: F.pad(x, (1, 1), mode="wrap"), ValueError, "pad: mode must be one of"),
])
def test_bad_arguments_name_the_op(call, error, message):
    with pytest.raises(error, match=message):
        call(ta.Tensor(X))


# ----- dtypes as in PyTorch -----

def test_integer_input_to_a_float_op_gives_the_default_float():
    assert (ta.Tensor([3, 4, 5]) / 2).dtype == np.float32
    np.testing.assert_array_equal((ta.Tensor([3, 4, 5]) / 2).numpy(), [1.5, 2.0, 2.5])
    ints = ta.Tensor([1, 4])
    for out in (ints.exp(), ints.sqrt(), ints.log(), ints.mean(), ints.var(), ints.sin(), ints.erf(),
                ints / ints, F.softplus(ints), ints.logsumexp()):
        assert out.dtype == np.float32
    assert (ints * 2).dtype == np.int64 and ints.sum().dtype == np.int64 and ints.abs().dtype == np.int64
    ta.set_default_dtype(np.float64)
    try:
        assert (ints / 2).dtype == np.float64
    finally:
        ta.set_default_dtype(np.float32)


LARGE = np.full((2, 1000), 100, np.float16) + np.arange(1000, dtype=np.float16) % 7


@pytest.mark.parametrize("name,fn,reference", [
    ("mean", lambda x: x.mean(axis=1), lambda a: a.mean(axis=1)),
    ("var", lambda x: x.var(axis=1), lambda a: a.var(axis=1, ddof=1)),
    ("std", lambda x: x.std(axis=1), lambda a: a.std(axis=1, ddof=1)),
    ("sum of a row that fits", lambda x: x[:, :600].sum(axis=1), lambda a: a[:, :600].sum(axis=1)),
    ("softmax", lambda x: F.softmax(x), lambda a: np.exp(a - a.max(1, keepdims=True)) /
     np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True)),
    ("log_softmax", lambda x: F.log_softmax(x), lambda a: a - a.max(1, keepdims=True) - np.log(
        np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True))),
    ("layer_norm", lambda x: F.layer_norm(x), lambda a: (a - a.mean(1, keepdims=True)) /
     np.sqrt(a.var(1, keepdims=True) + 1e-5)),
    ("cross_entropy", lambda x: F.cross_entropy(x * 100, [3, 5]), lambda a: np.mean([
        np.log(np.exp(100 * a[i] - 100 * a[i].max()).sum()) + 100 * a[i].max() - 100 * a[i, t]
        for i, t in enumerate([3, 5])])),
    ("logsumexp", lambda x: x.logsumexp(axis=1),
     lambda a: a.max(1) + np.log(np.exp(a - a.max(1, keepdims=True)).sum(1))),
])
def test_float16_reductions_accumulate_in_float32_and_stay_float16(name, fn, reference):
    out = fn(ta.Tensor(LARGE))
    assert out.dtype == np.float16, name
    expected = reference(LARGE.astype(np.float64))
    assert np.isfinite(out.numpy()).all(), name
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=2e-3, atol=2e-3, err_msg=name)


def test_float16_mean_of_large_values_is_finite():
    x = ta.Tensor(np.full((1, 1000), 100, np.float16))
    assert x.mean().item() == 100 and x.var().item() == 0 and x.sum().item() == np.inf   # 10⁵ > 65504
    assert (F.layer_norm(x).numpy() == 0).all()


def test_float16_gradients_flow_back_in_float16():
    x = ta.Tensor(LARGE[:, :8], requires_grad=True)
    F.layer_norm(x).backward(np.ones((2, 8), np.float16))
    assert x.grad.dtype == np.float16 and np.isfinite(x.grad).all()


def test_casting_overflow_gives_inf_quietly():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isinf((ta.Tensor(np.ones(2, np.float32)) + 1e39).numpy()).all()
        assert np.isinf((ta.Tensor(np.ones(2, np.float16)) * 1e6).numpy()).all()
        assert ta.Tensor(1e39, dtype=np.float32).item() == np.inf


# ----- docs -----

def test_dtype_table_is_current():
    from pathlib import Path

    from tinygrad_attn.commands.dtypes import dtype_table

    table = dtype_table()
    assert "| div | float32 | float32 | float16 | float32 | float64 |" in table
    assert "| mean | float32 | float32 | float16 | float32 | float64 |" in table
    doc = (Path(__file__).resolve().parents[2] / "docs" / "dtypes.md").read_text()
    assert doc == table, "docs/dtypes.md is stale: run `tinygrad-attn dtypes > docs/dtypes.md`"


def test_dtype_table_has_every_registered_op_and_each_runs_on_floats():
    """The rows come from the registry, so a new op gets one; an op whose Tensor method or F
    function the generic call does not fit fails here (float32 and float64 must give a dtype) until
    CALLS in commands/dtypes.py says how to call it."""
    from tinygrad_attn.commands.dtypes import CALLS, INPUT_DTYPES, op_rows
    from tinygrad_attn.ops import REGISTRY

    rows = op_rows()
    labels = {name.strip() for label, _ in rows for name in label.split(", ")}
    for name in REGISTRY:
        assert set(CALLS[name]) <= labels if name in CALLS else {name, f"F.{name}"} & labels, name
    for label, cells in rows:
        floats = dict(zip(INPUT_DTYPES, cells, strict=True))
        assert (floats["float32"], floats["float64"]) == ("float32", "float64"), label


def test_ops_doc_names_every_method_built_from_ops_and_what_is_out_of_scope():
    from tinygrad_attn.commands.ops import COMPOSED, CONSTRUCTORS, NO_GRADIENT, formula_table

    table = formula_table()
    assert "**Out of scope:** convolutions, pooling, linear algebra decompositions, bitwise ops, complex " \
           "numbers." in table
    operators = {"==": "__eq__", "!=": "__ne__", "<": "__lt__", "<=": "__le__", ">": "__gt__", ">=": "__ge__",
                 "~": "__invert__", "&": "__and__", "|": "__or__"}
    for name in " ".join(COMPOSED).split() + NO_GRADIENT.split():
        name = operators.get(name, name)
        assert hasattr(ta.Tensor, name) or hasattr(F, name), name
        assert f"`{name}`" in table or name.startswith("__")
    assert all(callable(getattr(ta, name)) for name in CONSTRUCTORS.split())
