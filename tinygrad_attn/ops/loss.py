"""Cross-entropy fused with log-softmax: one op from logits to the loss."""

from __future__ import annotations

import numpy as np

from . import register
from .base import Case, Op
from .softmax import softmax_parts

_TARGETS = np.array([2, 0, 3])
_IGNORED = np.array([[1, -100, 0], [3, 3, -100]])


@register
class CrossEntropy(Op):
    """ℓ = −log softmax(logits)[target] per position, then reduced ("mean", "sum" or "none").

    Positions whose target equals `ignore_index` contribute 0 and do not count in the mean.
    """

    name = "cross_entropy"
    formula = {"logits": "dlogits = (softmax(logits) − one_hot(target)) ⊙ dℓ / n_counted", "targets": None}
    residuals = {
        "probs": "P (the softmax probabilities)",
        "safe": "the targets",
        "counted": "which targets count (saved only with an ignore_index)",
        "n_counted": "n_counted (how many targets count)",
    }
    cases = (Case((3, 4), _TARGETS, params={"ignore_index": None, "reduction": "mean"}),
             Case((3, 4), _TARGETS, params={"ignore_index": None, "reduction": "sum"}),
             Case((3, 4), _TARGETS, params={"ignore_index": None, "reduction": "none"}),
             Case((2, 3, 4), _IGNORED, params={"ignore_index": -100, "reduction": "mean"}),
             Case((2, 3, 4), _IGNORED, params={"ignore_index": -100, "reduction": "none"}))

    @staticmethod
    def forward(ctx, logits, targets, *, ignore_index, reduction):
        xp = ctx.xp
        probs, m, s = softmax_parts(xp, logits, -1)
        counted = None if ignore_index is None else targets != ignore_index
        safe = targets if counted is None else xp.where(counted, targets, 0)
        # z[target] of each position: the logits as rows, one (row, target) pair picked per row.
        rows = logits.reshape(safe.size, logits.shape[-1])
        picked = rows[xp.arange(safe.size), safe.reshape(-1)].reshape(safe.shape)
        losses = m[..., 0] + xp.log(s[..., 0]) - picked         # −log p[target] = log Σ exp(z) − z[target]
        # n stays an array on the device (no int(): that would wait for the GPU and copy to the
        # host on every call); float, so that dividing by it keeps the logits' dtype.
        if counted is None:
            n_counted = xp.asarray(max(safe.size, 1), dtype=logits.dtype)
            ctx.save(probs=probs, safe=safe, n_counted=n_counted)
        else:
            # `where`, not `* counted`, so that an ignored row with −inf logits stays 0 instead
            # of 0 · inf = NaN.
            losses = xp.where(counted, losses, 0)
            n_counted = xp.maximum(counted.sum(dtype=logits.dtype), 1)
            ctx.save(probs=probs, safe=safe, counted=counted, n_counted=n_counted)
        if reduction == "none":
            return losses
        total = losses.sum()
        return total / n_counted if reduction == "mean" else total

    @staticmethod
    def backward(ctx, grad):
        """∂ℓ/∂logitsⱼ = pⱼ − [j = target] for a counted position, 0 for an ignored one; the mean
        divides by the number counted (a mean over no counted target is 0, with gradient 0)."""
        if not ctx.needs_grad[0]:
            return None, None
        xp = ctx.xp
        probs, safe = ctx.saved["probs"], ctx.saved["safe"]
        one_hot = xp.arange(probs.shape[-1]) == safe[..., None]               # (..., C)
        if ctx.reduction == "mean":
            grad = grad / ctx.saved["n_counted"]
        scale = grad[..., None] if ctx.reduction == "none" else grad
        if "counted" in ctx.saved:                  # saved only with an ignore_index
            scale = scale * ctx.saved["counted"][..., None]
        return (probs - one_hot) * scale, None
