"""PyTorch's element weights of the elementwise losses: binary_cross_entropy's `weight`,
binary_cross_entropy_with_logits' `weight` and `pos_weight`, mse_loss's `weight`; values against
the formulas written out in NumPy (and PyTorch where installed), gradients checked in float64."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F

RNG = np.random.default_rng(11)
X = RNG.standard_normal((3, 4)) * 3                     # logits
P = 1 / (1 + np.exp(-X))                                # probabilities
Y = RNG.uniform(size=(3, 4))                            # soft targets
W = np.array([0.5, 2.0, 0.0, 1.5])                      # one weight per column, broadcast over the rows
PW = np.array([3.0, 0.5, 1.0, 2.0])


def _reduce(losses, reduction):
    return {"mean": losses.mean(), "sum": losses.sum(), "none": losses}[reduction]


def _softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_weight_scales_each_element(reduction):
    expected = _reduce(-W * (Y * np.log(P) + (1 - Y) * np.log(1 - P)), reduction)
    out = F.binary_cross_entropy(ta.Tensor(P), Y, W, reduction=reduction)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)
    torch = pytest.importorskip("torch")
    theirs = torch.nn.functional.binary_cross_entropy(torch.tensor(P), torch.tensor(Y),
                                                      torch.tensor(np.broadcast_to(W, P.shape).copy()),
                                                      reduction=reduction)
    np.testing.assert_allclose(out.numpy(), theirs.numpy(), rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", ["weight", "pos_weight", "both"])
def test_binary_cross_entropy_with_logits_weights(reduction, weighted):
    w = W if weighted in ("weight", "both") else np.ones(4)
    pw = PW if weighted in ("pos_weight", "both") else np.ones(4)
    log_sigmoid, log_one_minus = -_softplus(-X), -_softplus(X)
    expected = _reduce(-w * (pw * Y * log_sigmoid + (1 - Y) * log_one_minus), reduction)
    given = {k: v for k, v in (("weight", W), ("pos_weight", PW)) if weighted in (k, "both")}
    out = F.binary_cross_entropy_with_logits(ta.Tensor(X), Y, reduction=reduction, **given)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)
    torch = pytest.importorskip("torch")
    weights = {k: torch.tensor(v) for k, v in given.items()}
    theirs = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(X), torch.tensor(Y),
                                                                  reduction=reduction, **weights)
    np.testing.assert_allclose(out.numpy(), theirs.numpy(), rtol=1e-12)


def test_pos_weight_gradients_are_the_hand_derived_ones():
    x, y = ta.Tensor(X, requires_grad=True), ta.Tensor(Y, requires_grad=True)
    F.binary_cross_entropy_with_logits(x, y, W, reduction="sum", pos_weight=PW).backward()
    sigmoid = 1 / (1 + np.exp(-X))
    np.testing.assert_allclose(x.grad, W * ((1 + (PW - 1) * Y) * sigmoid - PW * Y), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(y.grad, W * ((PW - 1) * _softplus(-X) - X), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("build", [
    lambda x, y: F.binary_cross_entropy(x.sigmoid(), y, W),
    lambda x, y: F.binary_cross_entropy(x.sigmoid(), y, W[None], reduction="none"),
    lambda x, y: F.binary_cross_entropy_with_logits(x, y, W, pos_weight=PW),
    lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none", pos_weight=PW),
    lambda x, y: F.binary_cross_entropy_with_logits(x, y, W, reduction="sum"),
    lambda x, y: F.mse_loss(x, y, weight=ta.Tensor(np.abs(X) + 0.5)),
])
def test_weighted_losses_gradcheck_in_float64(build):
    x = ta.Tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    y = ta.Tensor(RNG.uniform(0.1, 0.9, (3, 4)), requires_grad=True)
    assert ta.gradcheck(build, [x, y])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_weight_as_pytorch_and_differentiable(reduction):
    w = np.abs(X) + 0.5
    expected = {"mean": (w * (X - Y) ** 2).sum() / w.sum(), "sum": (w * (X - Y) ** 2).sum(),
                "none": w * (X - Y) ** 2}[reduction]
    weight = ta.Tensor(w, requires_grad=True)
    out = F.mse_loss(ta.Tensor(X), ta.Tensor(Y), reduction, weight)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)
    assert ta.gradcheck(lambda t: F.mse_loss(ta.Tensor(X), ta.Tensor(Y), reduction, t), [weight])
    torch = pytest.importorskip("torch")
    theirs = torch.nn.functional.mse_loss(torch.tensor(X), torch.tensor(Y), reduction=reduction,
                                          weight=torch.tensor(w))
    np.testing.assert_allclose(out.numpy(), theirs.numpy(), rtol=1e-12)


def test_the_weights_are_never_differentiated_in_binary_cross_entropy():
    weight = ta.Tensor(W, requires_grad=True)
    x = ta.Tensor(X, requires_grad=True)
    F.binary_cross_entropy_with_logits(x, Y, weight).backward()
    assert weight.grad is None and x.grad is not None


@pytest.mark.parametrize("build, message", [
    (lambda: F.binary_cross_entropy(ta.Tensor(P), Y, np.ones(3)),
     r"^binary_cross_entropy: weight of shape \(3,\) does not broadcast to \(3, 4\)$"),
    (lambda: F.binary_cross_entropy_with_logits(ta.Tensor(X), Y, pos_weight=np.ones((2, 3, 4))),
     r"^binary_cross_entropy_with_logits: pos_weight of shape \(2, 3, 4\) does not broadcast to \(3, 4\)$"),
    (lambda: F.mse_loss(ta.Tensor(X), Y, weight=np.ones(4)),
     r"^mse_loss: weight of shape \(4,\) does not match input of shape \(3, 4\)$"),
])
def test_weights_of_the_wrong_shape_are_refused(build, message):
    with pytest.raises(ta.ShapeError, match=message):
        build()
