"""Cross-entropy against a NumPy reference (float64) for every reduction and ignore_index, its
gradient against softmax − one_hot written out, the all-ignored mean, and its errors."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.guards import shapes

pytestmark = pytest.mark.filterwarnings("error")


def np_cross_entropy(logits, targets, ignore_index=None):
    """Per-position losses −log softmax(logits)[target] (0 where ignored) and the counted mask."""
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    counted = np.ones(targets.shape, bool) if ignore_index is None else targets != ignore_index
    picked = np.take_along_axis(logp, np.where(counted, targets, 0)[..., None], -1)[..., 0]
    return np.where(counted, -picked, 0.0), counted


def np_cross_entropy_grad(logits, targets, counted, scale):
    """d loss / d logits = (softmax − one_hot(target)) · scale, zero on ignored positions."""
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    one_hot = np.eye(logits.shape[-1])[np.where(counted, targets, 0)]
    return (p - one_hot) * (scale * counted)[..., None]


TARGETS = np.array([[0, 3, 1, 1, 2], [3, -1, 2, -1, 0]])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [None, -1, 3])
def test_matches_numpy_values_and_gradient(reduction, ignore_index, rng):
    logits = rng.standard_normal((2, 5, 4))
    targets = np.abs(TARGETS) if ignore_index != -1 else TARGETS
    losses, counted = np_cross_entropy(logits, targets, ignore_index)
    expected = {"none": losses, "sum": losses.sum(), "mean": losses.sum() / counted.sum()}[reduction]
    t = ta.Tensor(logits, requires_grad=True)
    out = F.cross_entropy(t, targets, ignore_index=ignore_index, reduction=reduction)
    assert out.shape == (() if reduction != "none" else (2, 5))
    np.testing.assert_allclose(out.data, expected, rtol=1e-12)

    cot = rng.standard_normal(out.shape)                 # a random cotangent, never all ones
    out.backward(cot)
    scale = {"none": cot, "sum": np.full((2, 5), cot), "mean": np.full((2, 5), cot / counted.sum())}
    np.testing.assert_allclose(t.grad, np_cross_entropy_grad(logits, targets, counted,
                                                             scale[reduction]), rtol=1e-10, atol=1e-14)


def test_single_vector_of_logits_and_a_scalar_target():
    logits = np.array([1.0, 2.0, 0.5])
    t = ta.Tensor(logits, requires_grad=True)
    loss = F.cross_entropy(t, np.array(1))
    np.testing.assert_allclose(loss.item(), np_cross_entropy(logits, np.array(1))[0])
    loss.backward()
    p = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(t.grad, p - [0, 1, 0])


def test_huge_logits_stay_finite():
    logits = np.array([[1e30, -1e30, 0.0], [1e4, 0.0, -1e4]])
    t = ta.Tensor(logits, requires_grad=True)
    loss = F.cross_entropy(t, [1, 0], reduction="none")
    np.testing.assert_allclose(loss.data, [2e30, 0.0])
    loss.backward(np.array([1.0, 1.0]))
    np.testing.assert_allclose(t.grad, [[1, -1, 0], [0, 0, 0]], atol=1e-12)


def test_targets_as_tensor_and_float32_kept(rng):
    logits = ta.Tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    loss = F.cross_entropy(logits, ta.Tensor(np.array([0, 3, 2])))
    assert loss.dtype == np.float32
    expected = np_cross_entropy(logits.data.astype(np.float64), np.array([0, 3, 2]))[0].mean()
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_all_targets_ignored_gives_zero_loss_and_zero_gradient(reduction):
    t = ta.Tensor(np.array([[1.0, 2.0, 3.0], [-np.inf, 0.0, 1.0]]), requires_grad=True)
    loss = F.cross_entropy(t, [-100, -100], ignore_index=-100, reduction=reduction)
    assert np.isfinite(loss.data).all() and (loss.data == 0).all()
    loss.backward(np.ones(loss.shape))
    assert (t.grad == 0).all()


def test_errors_name_the_bad_values():
    logits = ta.Tensor(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="cross_entropy: target 3 is out of range for 3 classes"):
        F.cross_entropy(logits, [0, 3])
    with pytest.raises(ValueError, match=r"target -1 is out of range .*ignore_index is -100"):
        F.cross_entropy(logits, [-1, 0], ignore_index=-100)
    with pytest.raises(ta.ShapeError, match=r"logits \(2, 3\) need targets of shape \(2,\), got \(3,\)"):
        F.cross_entropy(logits, [0, 1, 2])
    with pytest.raises(ta.ShapeError, match=r"logits \(2, 3\) need targets of shape \(2,\), got \(2, 1\)"):
        F.cross_entropy(logits, [[0], [1]])
    with pytest.raises(TypeError, match="targets must be integers, got dtype float"):
        F.cross_entropy(logits, [0.0, 1.0])
    with pytest.raises(TypeError, match="targets must be integers, got dtype bool"):
        F.cross_entropy(logits, [True, False])
    with pytest.raises(TypeError, match="cross_entropy: logits must be a float tensor"):
        F.cross_entropy(ta.Tensor([[0, 1]]), [0])
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        F.cross_entropy(logits, [0, 1], reduction="avg")


def test_valid_targets_are_checked_without_a_host_copy(monkeypatch):
    """The range check is a reduction on the targets' device; the targets come to the host only
    to word an error."""
    def refuse(*args):
        raise AssertionError("cross_entropy copied the targets to the host")

    logits = ta.Tensor(np.zeros((2, 3), dtype=np.float32), requires_grad=True)
    targets = ta.Tensor(np.array([2, -100]))
    monkeypatch.setattr(ta.Tensor, "numpy", refuse)
    monkeypatch.setattr(shapes, "to_numpy", refuse)   # the range check's only host path
    loss = F.cross_entropy(logits, targets, ignore_index=-100)
    assert loss.dtype == np.float32 and np.isclose(loss.data, np.log(3))   # the mean over 1 target
    loss.backward()
    np.testing.assert_allclose(logits.grad, [[1 / 3, 1 / 3, -2 / 3], [0, 0, 0]], rtol=1e-6)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="cross_entropy: target 5 is out of range for 3 classes"):
        F.cross_entropy(logits, ta.Tensor(np.array([0, 5])))
