"""The parameters the signature comparison (tests/engine/test_pytorch_signatures.py) found missing or
defaulting otherwise than PyTorch's, each with PyTorch's meaning: values written out, and asked of
torch where it is installed."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F


def test_add_and_sub_take_alpha():
    x, y = ta.Tensor([1.0, 2.0]), ta.Tensor([10.0, 20.0])
    np.testing.assert_array_equal(x.add(y, alpha=0.5).numpy(), [6.0, 12.0])
    np.testing.assert_array_equal(x.sub(y, alpha=2).numpy(), [-19.0, -38.0])
    np.testing.assert_array_equal(ta.arange(3).add(1, alpha=3).numpy(), [3, 4, 5])
    w = ta.Tensor([1.0, 2.0], requires_grad=True)
    x.sub(w, alpha=3.0).backward(np.array([1.0, 1.0]))
    np.testing.assert_array_equal(w.grad, [-3.0, -3.0])


A, B = [7, -7, 7, -7, 0, 9], [2, 2, -2, -2, 3, 3]
QUOTIENTS = {"trunc": [3, -3, -3, 3, 0, 3], "floor": [3, -4, -4, 3, 0, 3]}


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_modes_as_pytorch(mode):
    ints = ta.Tensor(np.array(A)).div(ta.Tensor(np.array(B)), rounding_mode=mode)
    assert ints.dtype == np.int64
    np.testing.assert_array_equal(ints.numpy(), QUOTIENTS[mode])
    floats = ta.Tensor([1.0, -1.0, 7.5, -7.5]).div(ta.Tensor([0.1, 0.1, 2.0, 2.0]), rounding_mode=mode)
    expected = {"trunc": [10.0, -10.0, 3.0, -3.0], "floor": [9.0, -10.0, 3.0, -4.0]}[mode]   # 1 // 0.1 = 9
    np.testing.assert_array_equal(floats.numpy(), expected)
    np.testing.assert_array_equal(ta.arange(5).div(2.5, rounding_mode=mode).numpy(), [0, 0, 0, 1, 1])
    torch = pytest.importorskip("torch")
    theirs = torch.tensor(A).div(torch.tensor(B), rounding_mode=mode)
    np.testing.assert_array_equal(theirs.numpy(), QUOTIENTS[mode])
    theirs = torch.tensor([1.0, -1.0, 7.5, -7.5]).div(torch.tensor([0.1, 0.1, 2.0, 2.0]), rounding_mode=mode)
    np.testing.assert_array_equal(theirs.numpy(), expected)


def test_a_rounded_quotient_passes_a_zero_gradient_and_bad_modes_are_refused():
    a, b = ta.Tensor([1.5, -2.5], requires_grad=True), ta.Tensor([2.0, 0.7], requires_grad=True)
    a.div(b, rounding_mode="floor").backward(np.array([1.0, 1.0]))
    np.testing.assert_array_equal(a.grad, [0.0, 0.0])
    np.testing.assert_array_equal(b.grad, [0.0, 0.0])
    with pytest.raises(ValueError, match=r"^div: rounding_mode must be None, 'trunc' or 'floor', got 'rou"):
        a.div(b, rounding_mode="round")
    with pytest.raises(ZeroDivisionError, match=r"^div: integer division by zero \(rounding_mode='trunc'\)$"):
        ta.arange(3).div(ta.Tensor(np.array([1, 0, 1])), rounding_mode="trunc")
    with pytest.raises(TypeError, match=r"^div: rounding_mode='floor' takes numbers, not bool"):
        ta.Tensor([True, False]).div(True, rounding_mode="floor")
    np.testing.assert_array_equal(ta.Tensor([1.0, -1.0]).div(0.0, rounding_mode="floor").numpy(),
                                  [np.inf, -np.inf])          # floats: inf, as PyTorch


def test_mean_prod_and_cumsum_take_dtype():
    x = ta.arange(1, 5)
    assert x.mean(dtype=np.float64).dtype == np.float64 and x.mean(dtype=np.float64).item() == 2.5
    assert x.prod(0, False, np.float32).dtype == np.float32 and x.prod(dtype=np.float32).item() == 24.0
    np.testing.assert_array_equal(x.cumsum(0, np.float64).numpy(), [1.0, 3.0, 6.0, 10.0])
    assert x.cumsum(0, dtype=np.float64).dtype == np.float64
    w = ta.Tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    total = w.cumsum(0, dtype=np.float64).sum()                 # the cast passes the gradient back
    assert total.dtype == np.float64
    total.backward()
    np.testing.assert_array_equal(w.grad, [2.0, 1.0])
    assert w.grad.dtype == np.float32


def test_numpy_takes_force_and_repeat_interleave_output_size():
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(x.numpy(force=True), [1.0, 2.0])
    np.testing.assert_array_equal(ta.arange(3).repeat_interleave(2, output_size=6).numpy(),
                                  [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(ta.arange(3).repeat_interleave([1, 0, 2], dim=0, output_size=3).numpy(),
                                  [0, 2, 2])
    with pytest.raises(ValueError, match=r"^repeat_interleave: output_size 5 is not the result's length 6 "
                                         r"along axis 0$"):
        ta.arange(3).repeat_interleave(2, output_size=5)


def test_pytorchs_defaults_dropout_p_pad_value_randint_dtype_topk_dim():
    ta.manual_seed(0)
    kept = F.dropout(ta.ones(10000)).numpy()                  # p = 0.5: zeros and twos
    assert set(np.unique(kept)) == {0.0, 2.0} and 0.45 < (kept == 0).mean() < 0.55
    np.testing.assert_array_equal(F.pad(ta.arange(2), (1, 1)).numpy(), [0, 0, 1, 0])       # value None: 0
    np.testing.assert_array_equal(F.pad(ta.arange(2), (1, 0), value=7).numpy(), [7, 0, 1])
    assert ta.randint(5, (3,)).dtype == np.int64 and ta.randint(0, 5, (3,), dtype=np.int32).dtype == np.int32
    assert ta.randint(0, 5, (2,), dtype=np.float32, requires_grad=True).requires_grad
    x = ta.Tensor([[3.0, 1.0, 2.0]])
    np.testing.assert_array_equal(x.topk(2, None).values.numpy(), [[3.0, 2.0]])            # None: the last
    with pytest.raises(TypeError, match=r"only float tensors can require grad"):
        ta.randint(0, 5, (2,), requires_grad=True)
