"""Cross-entropy, layer norm and dropout against NumPy references, and their errors."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F


def np_cross_entropy(logits, targets, ignore_index=None):
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    counted = np.ones(targets.shape, bool) if ignore_index is None else targets != ignore_index
    picked = np.take_along_axis(logp, np.where(counted, targets, 0)[..., None], -1)[..., 0]
    return -picked * counted, counted


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [None, -1])
def test_cross_entropy_matches_numpy(reduction, ignore_index, rng):
    logits = rng.standard_normal((2, 5, 4))
    targets = np.array([[0, 3, 1, 1, 2], [3, -1, 2, -1, 0]])
    if ignore_index is None:
        targets = np.abs(targets)
    losses, counted = np_cross_entropy(logits, targets, ignore_index)
    expected = {"none": losses, "sum": losses.sum(), "mean": losses.sum() / counted.sum()}[reduction]
    t = ta.Tensor(logits, requires_grad=True)
    out = F.cross_entropy(t, targets, ignore_index=ignore_index, reduction=reduction)
    np.testing.assert_allclose(out.data, expected)
    assert ta.gradcheck(lambda x: F.cross_entropy(x, targets, ignore_index, reduction), [t])


def test_cross_entropy_gradient_is_softmax_minus_one_hot():
    logits = np.array([[1.0, 2.0, 0.5]])
    t = ta.Tensor(logits, requires_grad=True)
    F.cross_entropy(t, [1]).backward()
    p = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(t.grad, p - np.array([[0, 1, 0]]))


def test_cross_entropy_all_ignored_is_zero_not_nan():
    t = ta.Tensor(np.ones((2, 3)), requires_grad=True)
    loss = F.cross_entropy(t, [-100, -100], ignore_index=-100)
    loss.backward()
    assert loss.item() == 0.0 and (t.grad == 0).all()


def test_cross_entropy_errors():
    logits = ta.Tensor(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="target 3 is out of range for 3 classes"):
        F.cross_entropy(logits, [0, 3])
    with pytest.raises(ValueError, match="target -1 is out of range"):
        F.cross_entropy(logits, [-1, 0], ignore_index=-100)
    with pytest.raises(ta.ShapeError, match=r"logits \(2, 3\) need targets of shape \(2,\), got \(3,\)"):
        F.cross_entropy(logits, [0, 1, 2])
    with pytest.raises(TypeError, match="targets must be integers"):
        F.cross_entropy(logits, [0.0, 1.0])
    with pytest.raises(ValueError, match="reduction must be"):
        F.cross_entropy(logits, [0, 1], reduction="avg")


def test_layer_norm_matches_numpy(rng):
    x, w, b = rng.standard_normal((2, 3, 6)), rng.standard_normal(6), rng.standard_normal(6)
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(F.layer_norm(ta.Tensor(x), ta.Tensor(w), ta.Tensor(b)).data, expected)
    with pytest.raises(ta.ShapeError, match=r"layer_norm: weight of shape \(5,\)"):
        F.layer_norm(ta.Tensor(x), ta.Tensor(np.ones(5)))


def test_dropout_is_inverted_seeded_and_checked():
    x = ta.Tensor(np.ones((200, 50)), requires_grad=True)
    ta.manual_seed(1)
    y = F.dropout(x, 0.25)
    ta.manual_seed(1)
    np.testing.assert_array_equal(F.dropout(x, 0.25).data, y.data)
    assert set(np.unique(y.data)) == {0.0, 1 / 0.75}
    assert abs((y.data == 0).mean() - 0.25) < 0.02
    y.backward(np.ones((200, 50)))
    np.testing.assert_array_equal(x.grad, y.data)
    assert F.dropout(x, 0.5, training=False) is x and F.dropout(x, 0.0) is x
    for p in (1.0, -0.1):
        with pytest.raises(ValueError, match=r"dropout: p must be in \[0, 1\)"):
            F.dropout(x, p)
