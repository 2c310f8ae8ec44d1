"""In-place edits of arrays that backward needs are caught: a small array is fingerprinted and a
large leaf's too (the edit is refused at backward), a large output of an op is read-only (the edit
fails at its line); safe ways still work."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn import nn, optim
from tinygrad_attn.guards.inplace import fingerprint


def test_edit_of_a_saved_leaf_after_forward_names_op_and_tensor():
    x = ta.Tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    x.data[0] = 5
    with pytest.raises(RuntimeError, match=r"^mul: input 0 \(leaf\) of shape \(3,\) was changed in "
                                           r"place after the forward pass"):
        y.backward()
    assert x.grad is None                       # refused before any gradient was written


def test_edit_of_a_saved_output_names_the_output():
    x = ta.Tensor([0.5, 1.0], requires_grad=True)
    y = x.exp()
    y.data *= 2
    with pytest.raises(RuntimeError, match=r"^exp: its output \(output of exp\) of shape \(2,\) was "
                                           "changed in place"):
        y.sum().backward()


LARGE = 20_000            # float32 elements: 80 KB, past the 64 KiB up to which bytes are copied


def test_a_large_output_of_an_op_is_read_only_so_an_edit_fails_at_its_line():
    x = ta.Tensor(np.linspace(-1, 1, LARGE, dtype=np.float32), requires_grad=True)
    y = x.exp()                                  # exp's backward reads its output
    with pytest.raises(ValueError, match="read-only"):
        y.data *= 2
    with pytest.raises(ValueError, match="read-only"):
        y.reshape(2, -1).data[0, 0] = 0.0        # a view of it is read-only too
    leaf = y.detach()                            # a writable copy: backward's values stay
    leaf.data[1] = 0.0
    y.sum().backward()
    np.testing.assert_allclose(x.grad, np.exp(x.data), rtol=1e-6)   # what backward read is intact
    assert y.node.watched == ()                  # sealed: nothing to compare at backward


def test_a_view_an_op_returns_of_its_own_buffer_is_read_only_too():
    lin = nn.Linear(100, 250)
    y = lin(ta.Tensor(np.ones((2, 40, 100), dtype=np.float32), requires_grad=True))  # (x W) reshaped
    loss = (y * y).sum()
    expected = 2 * y.data.sum(axis=(0, 1))
    with pytest.raises(ValueError, match="read-only"):
        y.data[...] = 100.0
    loss.backward()
    np.testing.assert_allclose(lin.bias.grad, expected, rtol=1e-5)


def test_a_detached_output_can_be_optimized_in_place():
    """PyTorch's idiom: a graph's result, detached, made a leaf that requires grad, and stepped."""
    for size in (2, LARGE):                      # a small output is writable, a large one copied
        start = (ta.Tensor(np.full(size, 1.0, dtype=np.float32), requires_grad=True) * 3.0).detach()
        start.requires_grad = True
        opt = optim.SGD([start], lr=0.5)
        (start * start).sum().backward()
        opt.step()
        np.testing.assert_array_equal(start.data, np.zeros(size))      # 3 − 0.5·2·3


def test_a_large_output_stays_writable_outside_a_graph_and_a_copy_is_always_writable():
    x = ta.Tensor(np.ones(LARGE, dtype=np.float32), requires_grad=True)
    with ta.no_grad():
        y = x.exp()                              # no graph: the array is the caller's
    y.data *= 2
    z = ta.Tensor(np.ones(LARGE, dtype=np.float32)).exp()   # no input requires grad: no graph
    z.data[0] = 0.0
    copy = ta.Tensor(x * 3.0)                    # Tensor(t) copies the data
    copy.data[0] = 7.0
    np.testing.assert_array_equal(copy.data[:2], [7.0, 3.0])


def test_a_view_of_a_leaf_is_not_sealed_and_the_leaf_is_still_watched():
    w = ta.Tensor(np.arange(6.0), requires_grad=True)
    v = w.reshape(2, 3)                          # a view of w's array: w's memory, not the op's
    loss = (v * v).sum()
    assert w.data.flags.writeable and v.data.flags.writeable
    w.data[4] = 0.0
    with pytest.raises(RuntimeError, match=r"^mul: input 0 \(output of reshape\) of shape \(2, 3\) was "
                                           "changed in place"):
        loss.backward()


def test_named_parameter_edited_through_a_view_is_named():
    lin = nn.Linear(3, 2)
    _ = lin.state_dict()
    x = ta.Tensor(np.ones((4, 3), dtype=np.float32), requires_grad=True)    # dx = dy Wᵀ reads W
    loss = lin(x).sum()
    lin.weight.reshape(-1).data[1] += 1.0       # the reshape is a view of the weight's array
    with pytest.raises(RuntimeError, match=r"^linear: input 1 \(weight\) of shape \(3, 2\)"):
        loss.backward()


def test_an_array_that_backward_does_not_read_may_change():
    """A first layer's input needs no gradient, so its backward (dW = xᵀ dy, db) never reads W:
    W is not kept for backward, and an update of W before backward leaves the gradients right."""
    lin = nn.Linear(3, 2)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    dy = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)
    y = lin(ta.Tensor(x))
    assert set(y.node.ctx.saved) == {"x"}
    lin.weight.data += 1.0
    y.backward(dy)
    np.testing.assert_allclose(lin.weight.grad, x.T @ dy, rtol=1e-6)
    np.testing.assert_allclose(lin.bias.grad, dy.sum(axis=0), rtol=1e-6)


@pytest.mark.parametrize("size", [4, 40_000], ids=["bytes copied (small)", "sum of bits (over 64 KiB)"])
def test_a_change_of_one_bit_or_of_equal_elements_is_seen(size):
    a = np.ones(size, dtype=np.float32)
    before = fingerprint(a)
    assert isinstance(before, bytes) == (a.nbytes <= 64 * 1024)
    a *= 2                                       # pairs of equal values: an xor would miss this
    assert fingerprint(a) != before
    b = np.zeros(size)
    before = fingerprint(b)
    b.view(np.uint64)[2] ^= 1                    # the smallest float64 change: one bit
    assert fingerprint(b) != before
    c = np.array([1.0, np.nan] * (size // 2))
    assert fingerprint(c) == fingerprint(c.copy())  # NaN == NaN by bits: no false alarm


def test_edit_under_no_grad_before_forward_is_fine():
    x = ta.Tensor([1.0, 2.0, 3.0], requires_grad=True)
    with ta.no_grad():
        x.data[0] = 5
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad, [10.0, 4.0, 6.0])


def test_reading_data_or_editing_unsaved_inputs_is_fine():
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    b = ta.Tensor([3.0, 4.0])
    y = (x + b).sum()                            # add saves nothing: its gradient needs no values
    _ = x.data.sum()
    b.data[0] = 100.0
    y.backward()
    np.testing.assert_allclose(x.grad, [1.0, 1.0])


def test_optimizer_step_between_two_passes():
    w = ta.Tensor([1.0, -1.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    x = ta.Tensor([2.0, 3.0])
    for expected_grad in ([4.0, -6.0], [-4.0, 12.0]):
        opt.zero_grad()
        loss = (w * w * x).sum()                 # dL/dw = 2 w x
        loss.backward()
        np.testing.assert_allclose(w.grad, expected_grad)
        opt.step()                               # w.data changes in place; the next forward is new
    np.testing.assert_allclose(w.data, [1.0, -4.0])


def test_backward_again_through_a_graph_older_than_an_optimizer_step_is_refused():
    w = ta.Tensor([1.0, 2.0], requires_grad=True)
    loss = (w * w).sum()
    loss.backward()
    optim.SGD([w], lr=0.1).step()
    with pytest.raises(RuntimeError, match=r"^mul: input 0 \(leaf\)"):
        loss.backward()


def test_attention_inputs_are_watched():
    q = ta.Tensor(np.ones((2, 3)), requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q)
    q.data[1, 2] = 0.0
    with pytest.raises(RuntimeError, match=r"^scaled_dot_product_attention: input 0 \(leaf\)"):
        out.sum().backward()


def test_an_intermediate_saved_by_two_ops_is_named_at_its_consumer():
    x = ta.Tensor(np.full(300, 0.5), requires_grad=True)       # 2.4 KB: its bytes are copied
    h = x.tanh()                                               # tanh saves its output ...
    loss = (h * h).sum()                                       # ... and mul saves it as input
    h.data[7] = 0.0
    with pytest.raises(RuntimeError, match=r"^mul: input 0 \(output of tanh\) of shape \(300,\)"):
        loss.backward()
    assert x.grad is None


def test_an_array_saved_by_two_ops_is_not_a_false_alarm():
    x = ta.Tensor(np.full(300, 0.5), requires_grad=True)
    h = x.tanh()
    (h * h).sum().backward()
    t = np.tanh(0.5)
    np.testing.assert_allclose(x.grad, np.full(300, 2 * t * (1 - t * t)))


@pytest.mark.parametrize("ignore_index", [None, -100])
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_targets_edited_after_forward_change_no_gradient(loss, ignore_index):
    """Targets are an index, not watched: the loss keeps its own copy of them (with every target
    counting, too, where no mask is built)."""
    def gradient(edit):
        x = ta.Tensor(np.log(np.full((2, 3), 1 / 3)), requires_grad=True)
        targets = ta.Tensor(np.array([0, 1]))
        value = getattr(F, loss)(x, targets, ignore_index=ignore_index)
        if edit:
            targets.data[0] = 2
        value.backward()
        return x.grad
    np.testing.assert_array_equal(gradient(edit=True), gradient(edit=False))
    assert gradient(edit=False)[0, 0] < 0 and gradient(edit=False)[0, 2] >= 0     # target 0's slope


def test_a_training_step_on_the_gpu_reads_nothing_back_to_the_host(strict_cuda):
    """Forward, backward and an AdamW step of a TinyTransformer on "cuda" (the strict stand-in
    counts every transfer): the in-place guard keeps versions there, not fingerprints, and the
    ids' and targets' range checks use the values they had on the host."""
    from strict_backend import TRANSFERS

    ta.manual_seed(0)
    model = nn.TinyTransformer(16, 32, 2, 2, 16).to("cuda")
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    for _ in range(2):
        ids = ta.Tensor(rng.integers(0, 16, (4, 8)), device="cuda")
        targets = ta.Tensor(rng.integers(0, 16, (4, 8)), device="cuda")
        TRANSFERS.clear()
        loss = F.cross_entropy(model(ids), targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        assert [t for t in TRANSFERS if t[0] == "to_host"] == []
    with pytest.raises(IndexError, match="id 16 is out of range for 16 embeddings"):
        model(ta.Tensor(np.array([[1, 16]]), device="cuda"))           # still checked, then named


def test_an_optimizer_step_between_two_passes_is_caught_on_the_gpu_by_version(strict_cuda):
    w = ta.Tensor(np.ones((3, 2), np.float32), requires_grad=True, device="cuda")
    x = ta.Tensor(np.ones((4, 3), np.float32), requires_grad=True, device="cuda")
    loss = (x @ w).sum()
    loss.backward()
    optim.SGD([w], lr=0.1).step()
    with pytest.raises(RuntimeError, match=r"^matmul: input 1 \(leaf\) of shape \(3, 2\) was changed"):
        loss.backward()


def test_a_training_step_on_the_cpu_reads_only_small_arrays_and_the_parameters():
    """Every output of more than 64 KiB that the graph itself made is sealed, so what backward
    reads again in a TinyTransformer's graph is small arrays' bytes and the parameters."""
    ta.manual_seed(0)
    model = nn.TinyTransformer(16, 64, 2, 2, 64, d_ff=512)        # fc1, fc2: 128 KiB each
    ids = ta.Tensor(np.random.default_rng(0).integers(0, 16, (8, 64)))
    loss = F.cross_entropy(model(ids), ids)
    made, stack, seen = [], [loss], set()       # the tensors the graph made
    while stack:
        t = stack.pop()
        if t is not None and t.node is not None and id(t) not in seen:
            seen.add(id(t))
            made.append(t)
            stack.extend(t.node.parents)

    def root(a):
        while isinstance(a.base, np.ndarray):
            a = a.base
        return a

    leaves = {id(p.data) for p in model.parameters()} | {id(ids.data)}
    large = [t.data for t in made if t.data.nbytes > 64 * 1024 and id(root(t.data)) not in leaves]
    assert len(large) > 10 and not any(a.flags.writeable for a in large)
    assert any(a.base is not None for a in large)   # views of an op's own buffer (linear's reshape)
    read = [a for t in made for _, a, then in t.node.watched if not isinstance(then, bytes)]
    assert read and {id(root(a)) for a in read} <= leaves


@pytest.mark.parametrize("edit", ["double", "negate", "negate two"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_large_leaf_edited_the_same_way_everywhere_is_caught(edit, dtype):
    """Every word moves by the same power of two: a sum that wraps at 2^64 (or at the itemsize)
    would come back to where it was; the guard's sum of 32-bit words in 64 bits cannot."""
    x = ta.Tensor(np.linspace(0.5, 1.5, 12_288).astype(dtype), requires_grad=True)  # 48 or 96 KiB
    y = (x * x).sum()
    if edit == "double":
        x.data *= 2
    elif edit == "negate":
        x.data *= -1
    else:
        x.data[:2] *= -1
    with pytest.raises(RuntimeError, match=r"^mul: input 0 \(leaf\) of shape \(12288,\) was changed"):
        y.backward()


@pytest.mark.parametrize("made_by_an_op", [False, True])
def test_an_edit_of_a_small_array_expanded_past_64_kib_is_caught(made_by_an_op):
    """A broadcast view is fingerprinted by its distinct elements: an element repeated 32 times
    must not multiply its change by 32 (which a sum of words would wrap back to 0)."""
    x = ta.Tensor(np.arange(1, 1025, dtype=np.float32), requires_grad=True)      # 4 KiB
    h = x * 1.0 if made_by_an_op else x
    w = ta.Tensor(np.ones((32, 1024), np.float32), requires_grad=True)
    y = (h.expand(32, 1024) * w).sum()                                           # 128 KiB view
    h.data[0] = -h.data[0]
    with pytest.raises(RuntimeError, match=r"^mul: input 0 \(output of expand\) of shape \(32, 1024\)"):
        y.backward()


def test_an_optimizer_steps_a_parameter_whose_data_was_set_from_a_graph():
    """`w.data = (w * 0.5).data` with grad on hands w a sealed array: the step writes a copy."""
    w = nn.Parameter(np.ones((129, 129), np.float32))       # its product is over 64 KiB: sealed
    w.data = (w * 0.5).data
    opt = optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.data, np.full((129, 129), 0.5 - 0.1 * 1.0), rtol=1e-6)
