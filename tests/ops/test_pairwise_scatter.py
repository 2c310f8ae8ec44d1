"""Scatter-add in a fixed order (tinygrad_attn/kernels/scatter.py): within its stated bound of the
textbook ``add.at``, bit-identical run to run, and on "cuda" never an ``add.at`` (CuPy's atomics).

The op-level cases (repeated ids, one id many times, all distinct, 1-d and n-d indices, an empty
index) are the ops' own: tests/ops/test_kernels.py compares each kernel with its textbook op on them
in float32 and float64 on both devices, and test_ops_gradcheck.py gradchecks them in float64.
"""

import numpy as np
import pytest
from strict_backend import SCATTERS

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn import nn
from tinygrad_attn.backend import to_numpy
from tinygrad_attn.kernels.scatter import flat_positions, scatter_sum, sum_rows_by_id


def textbook_sum(ids, rows, size):
    out = np.zeros((size,) + rows.shape[1:], dtype=rows.dtype)
    np.add.at(out, ids, rows)
    return out


ID_PATTERNS = {
    "repeated": lambda rng: rng.integers(0, 7, 40),
    "one id many times": lambda rng: np.full(300, 3),
    "all distinct": lambda rng: rng.permutation(7),
    "negative ids": lambda rng: rng.integers(-7, 7, 60),
    "empty": lambda rng: np.array([], dtype=np.intp),
}


@pytest.mark.parametrize("pattern", ID_PATTERNS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_sum_is_within_the_pairwise_bound_of_add_at(pattern, dtype, rng):
    """|pairwise − sequential| ≤ (k − 1 + ⌈log₂ k⌉) · u · Σ|g| for an id of k rows (u = eps / 2)."""
    ids = ID_PATTERNS[pattern](rng)
    rows = rng.standard_normal((ids.size, 5)).astype(dtype)
    got = sum_rows_by_id(np, ids, rows, 7)
    expected = textbook_sum(ids, rows, 7)
    assert got.dtype == dtype and got.shape == (7, 5)
    k = np.bincount(ids % 7, minlength=7)[:, None]
    magnitude = textbook_sum(ids, np.abs(rows).astype(np.float64), 7)
    bound = (np.maximum(k - 1, 0) + np.ceil(np.log2(np.maximum(k, 1)))) * np.finfo(dtype).eps / 2 * magnitude
    assert (np.abs(got.astype(np.float64) - expected) <= bound).all()
    assert (got[k[:, 0] == 0] == 0).all()


def test_runs_of_up_to_three_rows_are_added_in_the_textbook_order(rng):
    ids = np.array([4, 0, 4, 2, 2, 4, 1])                     # runs of 3, 1, 2, 1 rows
    rows = rng.standard_normal((7, 6)).astype(np.float32)
    np.testing.assert_array_equal(sum_rows_by_id(np, ids, rows, 5), textbook_sum(ids, rows, 5))


def test_an_infinite_gradient_stays_in_its_own_row(device):
    """add.at sends inf to its id alone; a product with a 0/1 matrix would make 0 · inf = NaN in
    every other id (why scatter.py adds pairwise instead)."""
    weight = ta.Tensor(np.zeros((4, 2)), requires_grad=True, device=device)
    out = weight[ta.Tensor(np.array([1, 3, 1, 0]), device=device)]
    out.backward(ta.Tensor(np.array([[np.inf, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]), device=device).data)
    np.testing.assert_array_equal(to_numpy(weight.grad), [[6.0, 7.0], [np.inf, 6.0], [0.0, 0.0], [2.0, 3.0]])


@pytest.mark.parametrize("index", [
    (slice(None), np.array([[1, 1], [0, 4]])),             # an array after a slice: flat positions
    (np.array([0, 2, 2]), np.array([1, 1, 1])),            # two arrays: one element three times
    (slice(1, 3), slice(None, None, -2)),                  # no array: written, never added
    (np.array([[True, False, True, False, True]] * 3),),   # a mask: each element once
    (np.array(2), slice(None)),                            # a 0-d array: one row
])
def test_scatter_sum_adds_at_any_index_as_add_at_does(index, rng):
    values = rng.standard_normal(np.zeros((3, 5))[index].shape)
    expected = np.zeros((3, 5))
    np.add.at(expected, index, values)
    np.testing.assert_array_equal(scatter_sum(np, (3, 5), index, values), expected)


def test_flat_positions_are_the_c_order_positions_of_what_an_index_reads():
    shape, index = (3, 4, 2), (np.array([2, 0]), slice(None), np.array([1, 1]))
    np.testing.assert_array_equal(flat_positions(np, shape, index), np.arange(24).reshape(shape)[index])


def _every_scattering_op(device):
    """Forward and backward through each op whose textbook form scatters with add.at."""
    rng = np.random.default_rng(0)
    x = ta.Tensor(rng.standard_normal((4, 5)), requires_grad=True, device=device)
    ids = ta.Tensor(np.array([[1, 1, 3], [0, 1, 1]]), device=device)
    index = ta.Tensor(np.array([[0, 2, 2], [1, 0, 0]]), device=device)
    src = ta.Tensor(rng.standard_normal((2, 3)), requires_grad=True, device=device)
    outputs = [x[ids], x[:, ids], x.gather(1, index), x.scatter_add(1, index, src),
               x.repeat_interleave(3, dim=0), F.pad(x, (2, 3), mode="replicate"),
               F.pad(x, (1, 1, 2, 2), mode="reflect")]
    for out in outputs:
        out.backward(ta.Tensor(rng.standard_normal(out.shape), device=device).data)
    return [out.numpy() for out in outputs] + [to_numpy(x.grad), to_numpy(src.grad)]


def test_no_scatter_on_the_gpu_adds_with_atomics(strict_cuda):
    """On "cuda" every scatter-add goes through scatter.py: no ufunc.at (CuPy's atomic adds, whose
    order changes from run to run), while the textbook forms do call it; the numbers agree."""
    SCATTERS.clear()
    fixed = _every_scattering_op("cuda")
    assert SCATTERS == []
    with ta.textbook():
        textbook = _every_scattering_op("cuda")
    assert {name for name, _ in SCATTERS} == {"add"} and len(SCATTERS) >= 7
    for a, b in zip(fixed, textbook):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_a_training_step_on_the_gpu_adds_with_no_atomics(strict_cuda):
    ta.manual_seed(3)
    model = nn.TinyTransformer(vocab_size=7, d_model=8, num_heads=2, num_layers=1, max_len=8).to("cuda")
    ids = ta.Tensor(np.array([[1, 1, 1, 4], [6, 1, 0, 1]]), device="cuda")
    SCATTERS.clear()
    loss = F.cross_entropy(model(ids), ta.Tensor(np.array([[2, 3, 4, 5], [5, 0, 1, 3]]), device="cuda"))
    loss.backward()
    assert model.tok_emb.weight.grad is not None and SCATTERS == []


def test_an_embeddings_gradient_is_the_same_bits_on_every_run(device):
    """Many rows per id, as a batch of text gives a common token. On a real GPU this is the check
    that the order is fixed (CuPy's add.at differed by up to 7.6e-6 over five runs)."""
    rng = np.random.default_rng(5)
    ids = ta.Tensor(rng.integers(0, 50, (16, 256)) * (rng.random((16, 256)) < 0.5), device=device)
    cotangent = ta.Tensor(rng.standard_normal((16, 256, 32)).astype(np.float32), device=device).data
    emb = nn.Embedding(50, 32).to(device)
    grads = []
    for _ in range(5):
        emb.zero_grad()
        emb(ids).backward(cotangent)
        grads.append(to_numpy(emb.weight.grad))
    for g in grads[1:]:
        np.testing.assert_array_equal(g, grads[0])
