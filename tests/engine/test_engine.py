"""The autodiff engine: accumulation, depth, order, grad mode, repeated backward."""

import gc

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import engine
from tinygrad_attn.apply import apply
from tinygrad_attn.ops.base import Op


def test_tensor_used_twice_accumulates():
    x = ta.Tensor([1.0, -2.0, 3.0], requires_grad=True)
    (x * x + x).backward(np.array([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(x.grad, 2 * np.array([1.0, -2.0, 3.0]) + 1)


def test_leaf_grad_accumulates_across_backward_calls_and_graph_is_reusable():
    x = ta.Tensor([2.0], requires_grad=True)
    y = (x * 3.0).sum()
    y.backward()
    y.backward()   # the graph is kept: a second pass works and accumulates
    np.testing.assert_allclose(x.grad, [6.0])
    x.zero_grad()
    y.backward()
    np.testing.assert_allclose(x.grad, [3.0])


def test_deep_chain_backpropagates_without_recursion():
    depth = 100_000
    x = ta.Tensor(np.array([1.0]), requires_grad=True)
    y = x
    for _ in range(depth):
        y = y * 1.0
    y = y + 0.0  # one more node: depth + 1 ops
    y.sum().backward()
    np.testing.assert_allclose(x.grad, [1.0])
    del y
    gc.collect()  # tearing the chain down must not recurse either


def test_order_is_the_same_on_every_run():
    def build():
        ta.manual_seed(3)
        a = ta.randn(3, 4, requires_grad=True)
        b = ta.randn(4, 2, requires_grad=True)
        h = (a @ b).tanh()
        return (h * h + h.exp()).mean()

    def ops(root):
        return [ev.tensor.op for ev in engine.backward_steps(root, np.array(1.0, np.float32))]

    first, second = ops(build()), ops(build())
    assert first == second
    assert first[0] == "mean" and first[-1] == "matmul"


def test_toposort_puts_producers_before_consumers():
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    a = x.exp()
    b = a * x
    c = b + a
    order = engine.toposort(c)
    position = {id(t): i for i, t in enumerate(order)}
    assert position[id(x)] < position[id(a)] < position[id(b)] < position[id(c)]


def test_no_grad_records_nothing():
    x = ta.Tensor([1.0], requires_grad=True)
    with ta.no_grad():
        y = x * 2.0
    assert not y.requires_grad and y.is_leaf and y.op == "mul"
    assert engine.is_grad_enabled()


def test_non_scalar_backward_needs_a_grad():
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"shape \(2,\) needs an explicit grad"):
        (x * 2.0).backward()


def test_backward_grad_shape_is_checked():
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ta.ShapeError, match=r"grad has shape \(3,\).*shape \(2,\)"):
        (x * 2.0).backward(np.ones(3))


def test_backward_without_graph_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        ta.Tensor([1.0]).backward()


def test_broadcast_gradient_is_summed_to_input_shape():
    a = ta.Tensor(np.ones((2, 3, 4)), requires_grad=True)
    b = ta.Tensor(np.arange(4.0).reshape(1, 4), requires_grad=True)
    g = np.arange(24.0).reshape(2, 3, 4)
    (a * b).backward(g)
    np.testing.assert_allclose(b.grad, g.sum(axis=(0, 1)).reshape(1, 4))
    np.testing.assert_allclose(a.grad, g * np.arange(4.0))


def test_max_ties_share_the_gradient_equally():
    x = ta.Tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], requires_grad=True)
    x.amax(axis=1).backward(np.array([1.0, 4.0]))
    np.testing.assert_allclose(x.grad, [[0, 0.5, 0.5], [2.0, 0, 2.0]])


def test_max_along_a_dim_gives_values_and_indices_as_pytorch():
    x = ta.Tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], requires_grad=True)
    values, indices = x.max(1)
    np.testing.assert_array_equal(values.numpy(), [3.0, 2.0])
    np.testing.assert_array_equal(indices.numpy(), [1, 0])                    # the first maximum
    values.backward(np.array([1.0, 4.0]))
    np.testing.assert_allclose(x.grad, [[0, 1.0, 0], [4.0, 0, 0]])            # to that index only
    low = x.min(dim=0, keepdim=True)
    assert low.values.shape == (1, 3) and low.indices.numpy().tolist() == [[0, 1, 1]]
    np.testing.assert_array_equal(low.values.numpy(), [[1.0, 0.0, 2.0]])
    assert x.max().item() == 3.0 and x.min().item() == 0.0                   # no dim: a value
    np.testing.assert_array_equal(x.amin(axis=1, keepdims=True).numpy(), [[1.0], [0.0]])
    with pytest.raises(TypeError, match=r"^max: got both dim= and axis="):
        x.max(dim=0, axis=1)


def test_getitem_repeated_indices_accumulate_and_negative_steps():
    x = ta.Tensor(np.arange(5.0), requires_grad=True)
    x[np.array([1, 1, 3, 1])].backward(np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_allclose(x.grad, [0, 7, 0, 3, 0])
    y = ta.Tensor(np.arange(6.0), requires_grad=True)
    out = y[::-2]
    np.testing.assert_allclose(out.data, [5.0, 3.0, 1.0])
    out.backward(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(y.grad, [0, 3, 0, 2, 0, 1])


@pytest.mark.parametrize("table,ids", [((16, 4), (8, 32)), ((5,), (7,)), ((4, 3, 2), (2, 5)), ((6, 2), (0,))])
def test_rows_picked_by_an_id_array_sum_their_gradients_as_add_at_does(table, ids, device, rng):
    """x[ids] with repeated and negative ids: the gradient equals NumPy's add.at (the CPU path
    sums sorted runs of ids instead)."""
    picked = rng.integers(-table[0], table[0], ids)
    g = rng.standard_normal(ids + table[1:])
    expected = np.zeros(table)
    np.add.at(expected, (picked,), g)
    x = ta.Tensor(rng.standard_normal(table), requires_grad=True, device=device)
    x[ta.Tensor(picked, device=device)].backward(ta.Tensor(g, device=device))
    np.testing.assert_allclose(x.grad if device == "cpu" else x.grad.get(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape_a,shape_b", [
    ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)), ((2, 3, 4), (4,)), ((4,), (4,)),
    ((2, 1, 3, 4), (5, 4, 2)),
])
def test_matmul_follows_numpy(shape_a, shape_b, rng):
    a, b = rng.standard_normal(shape_a), rng.standard_normal(shape_b)
    ta_a, ta_b = ta.Tensor(a, requires_grad=True), ta.Tensor(b, requires_grad=True)
    out = ta_a @ ta_b
    np.testing.assert_allclose(out.data, a @ b)
    assert ta.gradcheck(lambda p, q: p @ q, [ta_a, ta_b])


def test_split_and_swapaxes_and_T(rng):
    x = ta.Tensor(rng.standard_normal((2, 6, 3)), requires_grad=True)
    pieces = x.split([1, 2, 3], axis=1)
    assert [p.shape for p in pieces] == [(2, 1, 3), (2, 2, 3), (2, 3, 3)]
    assert [p.shape for p in x.split(2, dim=1)] == [(2, 2, 3)] * 3          # an int: each piece's size
    assert [p.shape for p in x.split(4, axis=1)] == [(2, 4, 3), (2, 2, 3)]  # the last piece smaller
    assert [p.shape for p in x.chunk(3, 1)] == [(2, 2, 3)] * 3              # chunk: how many pieces
    assert x.T.shape == (2, 3, 6) and x.swapaxes(0, -1).shape == (3, 6, 2)
    assert x.transpose(0, 2).shape == (3, 6, 2) and x.transpose(2, 0, 1).shape == (3, 2, 6)
    assert ta.gradcheck(lambda t: ta.concat([t.split(2, dim=1)[2], t.T.swapaxes(1, 2)], dim=1), [x])


def test_transpose_swaps_two_axes_as_pytorch():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ta.Tensor(x).transpose(0, 1).numpy(), x.T)     # NumPy's would be x
    np.testing.assert_array_equal(ta.Tensor(x).transpose(1, 0).numpy(), x.T)
    np.testing.assert_array_equal(ta.Tensor(x).transpose(1, 1).numpy(), x)
    y = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(ta.Tensor(y).transpose(0, 2).numpy(), np.swapaxes(y, 0, 2))
    np.testing.assert_array_equal(ta.Tensor(y).permute(1, 2, 0).numpy(), y.transpose(1, 2, 0))
    np.testing.assert_array_equal(ta.Tensor(y).permute((2, 0, 1)).numpy(), y.transpose(2, 0, 1))
    with pytest.raises(ta.ShapeError, match=r"^permute: dims \(0, 1\) are not a permutation for shape "
                                            r"\(2, 3, 4\)$"):
        ta.Tensor(y).permute(0, 1)


class _Twice(Op):
    """y = 2x whose backward returns what the test plants (not registered: a test-only op)."""

    name = "twice"
    returned: object = None

    @staticmethod
    def forward(ctx, x, unused=None):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return _Twice.returned(grad)


@pytest.mark.parametrize("returned, inputs, got", [
    (lambda g: 2 * g, 1, "ndarray"),                    # a bare array, even for one input
    (lambda g: [2 * g], 1, "list"),
    (lambda g: (2 * g,), 2, "a tuple of 1"),            # one gradient for two inputs
])
def test_backward_must_return_a_tuple_with_one_gradient_per_input(monkeypatch, returned, inputs, got):
    monkeypatch.setattr(_Twice, "returned", returned)
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    y = apply(_Twice, x, *([ta.Tensor([0.0, 0.0], requires_grad=True)] if inputs == 2 else []))
    with pytest.raises(TypeError) as info:
        y.sum().backward()
    assert str(info.value) == (f"twice.backward returned {got}, expected a tuple of {inputs} gradients "
                               "(one per input, None where none is needed)")
    assert x.grad is None


def test_a_one_tuple_backward_is_the_contract(monkeypatch):
    monkeypatch.setattr(_Twice, "returned", lambda g: (2 * g,))
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    apply(_Twice, x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])


class _SquareInPlace(Op):
    """y = x²; its backward writes into the gradient it is handed, as a learner's might."""

    name = "square_in_place"

    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        """dx = 2 x ⊙ dy, computed in the incoming array."""
        grad *= 2 * ctx.saved["x"]
        return (grad,)


def test_an_op_of_your_own_may_overwrite_the_gradient_it_is_handed():
    x = ta.Tensor([1.0, -2.0, 3.0], requires_grad=True)
    seed = np.array([1.0, 10.0, 100.0])
    y = x + x                                   # add sends one array to both uses of ...
    out = apply(_SquareInPlace, y) + apply(_SquareInPlace, y * 1.0)
    out.backward(seed)
    np.testing.assert_array_equal(seed, [1.0, 10.0, 100.0])        # the caller's seed is untouched
    # d/dx [(2x)² + (2x)²] = 16 x, weighted by the seed
    np.testing.assert_allclose(x.grad, 16 * np.array([1.0, -2.0, 3.0]) * seed)
    np.testing.assert_array_equal(out.node.grad, seed)              # the drawing's gradient too
