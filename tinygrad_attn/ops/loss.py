"""Losses, each one op from its inputs to the loss: cross-entropy fused with log-softmax (integer
targets, or class probabilities), nll_loss, binary cross-entropy (on probabilities or logits),
mse_loss.

Each takes ``reduction``: "mean" (over the positions that count), "sum" or "none" (the loss per
position). A float16 input is computed in float32 and the loss cast back to float16, as PyTorch
accumulates (``half_in_single``).
"""

from __future__ import annotations

import numpy as np

from .base import Case, Op
from .registry import register
from .softmax import softmax_parts

__all__ = ["BinaryCrossEntropy", "BinaryCrossEntropyWithLogits", "CrossEntropy", "CrossEntropyProbs",
           "MseLoss", "NllLoss", "class_scale", "cross_entropy_losses"]


_TARGETS = np.array([2, 0, 3])
_IGNORED = np.array([[1, -100, 0], [3, 3, -100]])
_WEIGHT = np.array([0.5, 2.0, 1.0, 0.25])


@register
class CrossEntropy(Op):
    """ℓ = −log softmax(logits)[target] per position, then reduced ("mean", "sum" or "none").

    Positions whose target equals `ignore_index` contribute 0 and do not count in the mean. With
    label smoothing ε the target is (1 − ε)·one_hot + ε/C: ℓ = (1 − ε)·ℓ_target + ε·mean_c(ℓ_c).
    With class weights w each position's loss is multiplied by w[target], and the mean divides by
    Σ w[target] over the counted positions (PyTorch's weighted mean) instead of their number.
    """

    name = "cross_entropy"
    formula = {"logits": "dlogits = (softmax(logits) − (1 − ε)·one_hot(target) − ε/C) ⊙ dℓ / n_counted",
               "targets": None, "weight": None}
    residuals = {
        "probs": "P (the softmax probabilities)",
        "safe": "the targets",
        "counted": "which targets count (None: every one), or w[target] (0 where not counted)",
        "n_counted": "n_counted (how many targets count, or Σ w[target] over them)",
    }
    cases = (Case((3, 4), _TARGETS, _WEIGHT, params={"ignore_index": None, "reduction": "mean"}),
             Case((2, 3, 4), _IGNORED, _WEIGHT, params={"ignore_index": -100, "reduction": "sum"}),
             Case((3, 4), _TARGETS, params={"ignore_index": None, "reduction": "mean"}),
             Case((3, 4), _TARGETS, params={"ignore_index": None, "reduction": "sum"}),
             Case((3, 4), _TARGETS, params={"ignore_index": None, "reduction": "none"}),
             Case((2, 3, 4), _IGNORED, params={"ignore_index": -100, "reduction": "mean"}),
             Case((2, 3, 4), _IGNORED, params={"ignore_index": -100, "reduction": "none"}),
             Case((2, 3, 4), _IGNORED, params={"ignore_index": -100, "reduction": "mean",
                                                     "label_smoothing": 0.2}))

    @classmethod
    def formulas_at(cls, ctx, n_inputs):
        """Without label smoothing (ε = 0) the target is one_hot(target) itself; class weights scale
        each row by w[target] and the mean divides by their sum."""
        if ctx.smoothing:
            return cls.formulas_for(n_inputs)
        if ctx.weighted:
            return ("dlogits = (softmax(logits) − one_hot(target)) ⊙ w[target] ⊙ dℓ / Σ w[target]",
                    None, None)
        return ("dlogits = (softmax(logits) − one_hot(target)) ⊙ dℓ / n_counted", None, None)[:n_inputs]

    half_in_single = True       # the log-sum-exp accumulated in float32

    @staticmethod
    def forward(ctx, logits, targets, weight=None, *, ignore_index, reduction, label_smoothing=0.0):
        return cross_entropy_losses(ctx, logits, targets, weight, softmax_parts(ctx.xp, logits, -1),
                                    ignore_index, reduction, label_smoothing)

    @staticmethod
    def backward(ctx, grad):
        """∂ℓ/∂logitsⱼ = pⱼ − [j = target] for a counted position, 0 for an ignored one; the mean
        divides by the number counted (a mean over no counted target is 0, with gradient 0).
        With smoothing the target distribution is (1 − ε)·one_hot + ε/C, and pⱼ minus it is the slope.
        Class weights scale each position's slope by w[target] (the loss is w[target]·ℓ), and the
        mean divides by Σ w[target] instead."""
        nones = (None,) * (len(ctx.needs_grad) - 1)        # targets, and the weight when given
        if not ctx.needs_grad[0]:
            return (None, *nones)
        xp = ctx.xp
        probs, safe, counted = ctx.saved["probs"], ctx.saved["safe"], ctx.saved["counted"]
        classes = probs.shape[-1]
        scale = class_scale(grad, ctx.reduction, ctx.saved["n_counted"], counted)
        one_hot = (xp.arange(classes) == safe).astype(probs.dtype)                # (..., C)
        target = (1 - ctx.smoothing) * one_hot + ctx.smoothing / classes
        return ((probs - target) * scale, *nones)


def cross_entropy_losses(ctx, logits, targets, weight, parts, ignore_index, reduction, label_smoothing):
    """CrossEntropy's forward from softmax's parts (probs, row max m, row sum s) of the logits:
    ℓ = log Σ exp(z) − z[target] = m + log s − z[target] per position, reduced; saves what its
    backward reads."""
    xp = ctx.xp
    ctx.smoothing, ctx.weighted = label_smoothing, weight is not None
    probs, m, s = parts
    counted, safe, n_counted = _counting(xp, targets, ignore_index, logits.dtype)
    # z[target] of each position: the logits as rows, one (row, target) pair picked per row
    # (what take_along_axis does, without building its index).
    rows = logits.reshape(safe.size, logits.shape[-1])
    picked = rows[xp.arange(safe.size), safe.reshape(-1)].reshape(targets.shape)
    # −log p[target] = log Σ exp(z) − z[target]; `where`, not `* counted`, so that an ignored
    # row with −inf logits stays 0 instead of 0 · inf = NaN.
    lse = m[..., 0] + xp.log(s[..., 0])
    losses = lse - picked
    if label_smoothing:             # ε · mean over the classes of −log p_c = ε · (lse − mean z)
        losses = (1 - label_smoothing) * losses + label_smoothing * (lse - logits.mean(axis=-1))
    if counted is not None:
        losses = xp.where(counted, losses, 0)
    if weight is not None:
        losses, counted, n_counted = _weighted(xp, losses, weight, safe, counted, logits.dtype)
    ctx.save(probs=probs, safe=safe, counted=counted, n_counted=n_counted)
    return _reduced(losses, reduction, n_counted)


def _weighted(xp, losses, weight, safe, counted, dtype):
    """(losses · w[target], w[target] (0 where not counted), Σ w[target]): PyTorch's class weights.
    The mean divides by the sum of the counted positions' weights (1 if it is 0: a loss of 0)."""
    w = weight.astype(dtype, copy=False)[safe[..., 0]]
    if counted is not None:
        w = xp.where(counted, w, 0)
    total = w.sum()
    return losses * w, w, xp.where(total == 0, xp.asarray(1, dtype=dtype), total)


def _counting(xp, targets, ignore_index, dtype):
    """(counted, safe, n) for integer targets: which positions count (None when every one does,
    `ignore_index` None: no mask to build or apply), the targets shaped (..., 1), ignored ones
    replaced by 0, in an array of their own (editing the targets later changes no gradient), and
    how many positions count, at least 1. n stays an array on the device (no int(): that would
    wait for the GPU and copy to the host on every call), of `dtype`, so that dividing by it keeps
    the inputs' dtype."""
    if ignore_index is None:
        return None, targets[..., None].copy(), xp.asarray(max(targets.size, 1), dtype=dtype)
    counted = targets != ignore_index
    return counted, xp.where(counted, targets, 0)[..., None], xp.maximum(counted.sum(dtype=dtype), 1)


def class_scale(grad, reduction: str, n, counted):
    """dℓ per position (``_per_position``), 0 where the target does not count, given a size-1
    class axis when it is one per position, to multiply a (..., C) gradient."""
    scale = _per_position(grad, reduction, n)
    if counted is not None:
        scale = scale * counted
    return scale[..., None] if scale.ndim else scale


def _reduced(losses, reduction: str, n):
    """The per-position losses summed, averaged over `n` positions, or kept ("none")."""
    if reduction == "none":
        return losses
    total = losses.sum()
    return total / n if reduction == "mean" else total


def _per_position(grad, reduction: str, n):
    """dℓ per position from the gradient of the reduced loss: dℓ itself ("none"), the scalar dℓ
    ("sum"), or dℓ/n ("mean"); broadcast against the positions by the caller."""
    return grad / n if reduction == "mean" else grad


@register
class CrossEntropyProbs(Op):
    """ℓ = −Σ_c q_c log softmax(logits)_c per position, with class-probability targets q (then reduced).

    F.cross_entropy runs this op when the targets are floats shaped like the logits. With label
    smoothing ε the targets become (1 − ε)·q + ε/C. The mean is over the positions.
    """

    name = "cross_entropy_probs"
    formula = {"logits": "dlogits = (softmax(logits) ⊙ Σ_c q_c − q) ⊙ dℓ",
               "targets": "dq = −(1 − ε) log softmax(logits) ⊙ dℓ"}
    residuals = {"probs": "P (the softmax probabilities)", "log_probs": "log P",
                 "targets": "q (the smoothed targets)"}
    cases = (Case((3, 4), (3, 4), params={"label_smoothing": 0.0, "reduction": "mean"}, domain="probability"),
             Case((2, 3, 4), (2, 3, 4), params={"label_smoothing": 0.1, "reduction": "sum"},
                  domain="probability"),
             Case((3, 5), (3, 5), params={"label_smoothing": 0.0, "reduction": "none"}, domain="probability"))

    half_in_single = True       # the log-sum-exp accumulated in float32

    @staticmethod
    def forward(ctx, logits, targets, *, label_smoothing, reduction):
        xp = ctx.xp
        probs, m, s = softmax_parts(xp, logits, -1)
        log_probs = logits - m - xp.log(s)
        if label_smoothing:
            targets = (1 - label_smoothing) * targets + label_smoothing / logits.shape[-1]
        ctx.save(probs=probs, log_probs=log_probs, targets=targets)
        ctx.n = max(int(np.prod(logits.shape[:-1])), 1)
        return _reduced(-(targets * log_probs).sum(axis=-1), reduction, ctx.n)

    @staticmethod
    def backward(ctx, grad):
        """ℓ = −Σ q_c (z_c − lse): ∂ℓ/∂z_j = −q_j + p_j Σ q_c (p_j − q_j when q sums to 1);
        ∂ℓ/∂q_c = −log p_c, times (1 − ε) through the smoothing."""
        scale = _per_position(grad, ctx.reduction, ctx.n)[..., None]
        probs, q = ctx.saved["probs"], ctx.saved["targets"]
        return ((probs * q.sum(axis=-1, keepdims=True) - q) * scale if ctx.needs_grad[0] else None,
                -(1 - ctx.label_smoothing) * ctx.saved["log_probs"] * scale if ctx.needs_grad[1] else None)


@register
class NllLoss(Op):
    """ℓ = −x[target] per position, x being log-probabilities (classes on the last axis), then reduced.

    Positions whose target equals `ignore_index` contribute 0 and do not count in the mean; class
    weights w multiply each position's loss by w[target] and make the mean divide by Σ w[target].
    """

    name = "nll_loss"
    formula = {"x": "dx = −one_hot(target) ⊙ w[target] ⊙ dℓ / n_counted  (w = 1 without weights)",
               "targets": None, "weight": None}
    residuals = {"safe": "the targets", "counted": "which targets count (None: every one), or w[target]",
                 "n_counted": "how many count, or Σ w[target] over them"}
    cases = (Case((3, 4), _TARGETS, _WEIGHT, params={"ignore_index": None, "reduction": "mean"}),
             Case((2, 3, 4), _IGNORED, _WEIGHT, params={"ignore_index": -100, "reduction": "none"}),
             Case((3, 4), _TARGETS, params={"ignore_index": None, "reduction": "mean"}),
             Case((2, 3, 4), _IGNORED, params={"ignore_index": -100, "reduction": "sum"}),
             Case((2, 3, 4), _IGNORED, params={"ignore_index": -100, "reduction": "none"}))

    @staticmethod
    def forward(ctx, x, targets, weight=None, *, ignore_index, reduction):
        xp = ctx.xp
        ctx.classes = x.shape[-1]
        counted, safe, n_counted = _counting(xp, targets, ignore_index, x.dtype)
        losses = -xp.take_along_axis(x, safe, axis=-1)[..., 0]
        if counted is not None:
            losses = xp.where(counted, losses, 0)
        if weight is not None:
            losses, counted, n_counted = _weighted(xp, losses, weight, safe, counted, x.dtype)
        ctx.save(safe=safe, counted=counted, n_counted=n_counted)
        return _reduced(losses, reduction, n_counted)

    @staticmethod
    def backward(ctx, grad):
        """ℓ depends on one element per position, with slope −1 (−w[target] with class weights):
        dx = −dℓ at the target, 0 elsewhere."""
        nones = (None,) * (len(ctx.needs_grad) - 1)
        if not ctx.needs_grad[0]:
            return (None, *nones)
        safe, counted = ctx.saved["safe"], ctx.saved["counted"]
        one_hot = ctx.xp.arange(ctx.classes) == safe
        return (-(one_hot * class_scale(grad, ctx.reduction, ctx.saved["n_counted"], counted)), *nones)


_ELEMENT_WEIGHT = np.array([0.5, 2.0, 1.0, 0.25])       # one per column of a (3, 4) input, broadcast
_POS_WEIGHT = np.array([3.0, 0.5, 1.0, 2.0])


def _weighted_losses(ctx, losses, weight):
    """The per-element losses times `weight` (None: unweighted), which backward reads again."""
    if weight is None:
        return losses
    ctx.save(weight=weight)
    return losses * weight


def _weighted_scale(ctx, grad, size):
    """dℓ per element (``_per_position``) times the element weights when there are some."""
    scale = _per_position(grad, ctx.reduction, size)
    return scale * ctx.saved["weight"] if "weight" in ctx.saved else scale


@register
class BinaryCrossEntropy(Op):
    """ℓ = −w·(y log p + (1 − y) log(1 − p)) per element, each log clamped at −100 (as PyTorch); w
    the element weights (1 without them, broadcast to p), then reduced (the mean over the elements)."""

    name = "binary_cross_entropy"
    formula = {"p": "dp = dℓ ⊙ w ⊙ (p − y) / max(p(1 − p), 1e−12)",
               "y": "dy = dℓ ⊙ w ⊙ (log(1 − p) − log p)", "weight": None}
    residuals = {"p": "p (the probabilities)", "y": "y (the targets)", "weight": "w (the element weights)"}
    cases = (Case((3, 4), (3, 4), params={"reduction": "mean"}, domain="probability"),
             Case((5,), (5,), params={"reduction": "sum"}, domain="probability"),
             Case((2, 3), (2, 3), params={"reduction": "none"}, domain="probability"),
             Case((3, 4), (3, 4), _ELEMENT_WEIGHT, params={"reduction": "mean"}, domain="probability"),
             Case((2, 4), (2, 4), _ELEMENT_WEIGHT[None], params={"reduction": "none"}, domain="probability"))

    @staticmethod
    def forward(ctx, p, y, weight=None, *, reduction):
        xp = ctx.xp
        ctx.save(p=p, y=y)
        losses = -(y * xp.maximum(xp.log(p), -100) + (1 - y) * xp.maximum(xp.log1p(-p), -100))
        return _reduced(_weighted_losses(ctx, losses, weight), reduction, losses.size)

    @staticmethod
    def backward(ctx, grad):
        """∂ℓ/∂p = w(−y/p + (1 − y)/(1 − p)) = w(p − y)/(p(1 − p)), the denominator kept ≥ 1e−12;
        ℓ is linear in y with slope w(log(1 − p) − log p). The weights take no gradient."""
        xp = ctx.xp
        p, y = ctx.saved["p"], ctx.saved["y"]
        scale = _weighted_scale(ctx, grad, p.size)
        return ((p - y) / xp.maximum(p * (1 - p), 1e-12) * scale if ctx.needs_grad[0] else None,
                (xp.maximum(xp.log1p(-p), -100) - xp.maximum(xp.log(p), -100)) * scale
                if ctx.needs_grad[1] else None, *(None,) * (len(ctx.needs_grad) - 2))


@register
class BinaryCrossEntropyWithLogits(Op):
    """ℓ = −w·(pw·y log σ(x) + (1 − y) log(1 − σ(x))) = w·((1 − y)x + (1 + (pw − 1)y)·softplus(−x)),
    stable; w the element weights and pw the positive weights (1 without them, broadcast to x)."""

    name = "binary_cross_entropy_with_logits"
    formula = {"x": "dx = dℓ ⊙ w ⊙ ((1 + (pw − 1)y)·σ(x) − pw·y)",
               "y": "dy = dℓ ⊙ w ⊙ ((pw − 1)·softplus(−x) − x)", "weight": None, "pos_weight": None}
    residuals = {"x": "x (the logits)", "y": "y (the targets)", "weight": "w (the element weights)",
                 "pos_weight": "pw (the weights of the positive term)",
                 "softplus_neg": "softplus(−x) = −log σ(x)"}
    cases = (Case((3, 4), (3, 4), params={"reduction": "mean"}),
             Case((5,), (5,), params={"reduction": "sum"}, domain="probability"),
             Case((2, 3), (2, 3), params={"reduction": "none"}),
             Case((3, 4), (3, 4), _ELEMENT_WEIGHT, _POS_WEIGHT, params={"reduction": "mean"},
                  domain="probability"),
             Case((3, 4), (3, 4), None, _POS_WEIGHT, params={"reduction": "none"}),
             Case((2, 4), (2, 4), _ELEMENT_WEIGHT, params={"reduction": "sum"}, domain="probability"))

    @staticmethod
    def forward(ctx, x, y, weight=None, pos_weight=None, *, reduction):
        xp = ctx.xp
        ctx.save(x=x, y=y)
        tail = xp.log1p(xp.exp(-xp.abs(x)))
        if pos_weight is None:
            losses = xp.maximum(x, 0) - x * y + tail                # softplus(x) − x·y
        else:
            softplus_neg = xp.maximum(-x, 0) + tail                 # −log σ(x)
            ctx.save(pos_weight=pos_weight, softplus_neg=softplus_neg)
            losses = (1 - y) * x + (1 + (pos_weight - 1) * y) * softplus_neg
        return _reduced(_weighted_losses(ctx, losses, weight), reduction, losses.size)

    @staticmethod
    def backward(ctx, grad):
        """With −log σ(x) = softplus(−x) and −log(1 − σ(x)) = softplus(x) = x + softplus(−x):
        ℓ/w = pw·y·softplus(−x) + (1 − y)(x + softplus(−x)) = (1 − y)x + (1 + (pw − 1)y)·softplus(−x).
        d softplus(−x)/dx = −σ(−x) = σ(x) − 1, so ∂ℓ/∂x = w((1 − y) + (1 + (pw − 1)y)(σ(x) − 1))
        = w((1 + (pw − 1)y)σ(x) − pw·y), and ∂ℓ/∂y = w(−x + (pw − 1)·softplus(−x)); pw = 1 gives
        σ(x) − y and −x. The weights take no gradient."""
        xp = ctx.xp
        x, y = ctx.saved["x"], ctx.saved["y"]
        scale = _weighted_scale(ctx, grad, x.size)
        sigmoid = 0.5 * (1 + xp.tanh(0.5 * x))
        nones = (None,) * (len(ctx.needs_grad) - 2)
        if "pos_weight" not in ctx.saved:
            return ((sigmoid - y) * scale if ctx.needs_grad[0] else None,
                    -x * scale if ctx.needs_grad[1] else None, *nones)
        pw = ctx.saved["pos_weight"]
        return (((1 + (pw - 1) * y) * sigmoid - pw * y) * scale if ctx.needs_grad[0] else None,
                ((pw - 1) * ctx.saved["softplus_neg"] - x) * scale if ctx.needs_grad[1] else None, *nones)


@register
class MseLoss(Op):
    """ℓ = (a − b)² per element, then reduced."""

    name = "mse_loss"
    formula = {"a": "da = 2(a − b) ⊙ dℓ", "b": "db = −2(a − b) ⊙ dℓ"}
    residuals = {"diff": "a − b"}
    cases = (Case((3, 4), (3, 4), params={"reduction": "mean"}),
             Case((5,), (5,), params={"reduction": "sum"}),
             Case((2, 3), (2, 3), params={"reduction": "none"}))

    @staticmethod
    def forward(ctx, a, b, *, reduction):
        diff = a - b
        ctx.save(diff=diff)
        return _reduced(diff * diff, reduction, diff.size)

    @staticmethod
    def backward(ctx, grad):
        """∂(a − b)²/∂a = 2(a − b) = −∂(a − b)²/∂b."""
        diff = ctx.saved["diff"]
        slope = 2 * diff * _per_position(grad, ctx.reduction, diff.size)
        return (slope if ctx.needs_grad[0] else None, -slope if ctx.needs_grad[1] else None)
