"""Softmax and log-softmax over one axis, with max-subtraction and boolean or float masks.

The masking rule is the one attention uses (``masking.py``): a boolean ``keep`` marks the
positions that take part (True), a float ``bias`` is added to the logits. Masked positions get
probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
"""

from __future__ import annotations

import numpy as np

from . import register
from .base import Case, Op
from .masking import masked_logits, masked_softmax

_CAUSAL = np.tril(np.ones((4, 4), dtype=bool))
_ROW_MASKED = np.array([[True, False, True, True], [False, False, False, False],
                        [True, True, True, True]])
_FLOAT_MASK = np.array([[0.0, -1.0, 2.0, -np.inf]])
_FLOAT_ROW_MASKED = np.array([[0.5, -np.inf, 0.0, 1.0], [-np.inf] * 4, [0.0, 0.0, -3.0, 0.0]])
_MASK_CASES = (Case((3, 4), None, None, params={"axis": 1}),
               Case((4, 4), _CAUSAL, None, params={"axis": 1}),
               Case((3, 4), _ROW_MASKED, None, params={"axis": 1}),
               Case((3, 4), None, _FLOAT_MASK, params={"axis": 1}),
               Case((3, 4), None, _FLOAT_ROW_MASKED, params={"axis": 1}),
               Case((2, 3, 4), _ROW_MASKED, _FLOAT_MASK, params={"axis": 2}),
               Case((4, 3), None, None, params={"axis": 0}),
               Case((4, 4), _CAUSAL, None, params={"axis": 0}),
               Case((4, 3, 2), _ROW_MASKED.T[:, :, None], None, params={"axis": 0}))


@register
class Softmax(Op):
    """y = exp(z − max z) / Σ exp(z − max z) along `axis`, z the masked logits."""

    name = "softmax"
    formula = {"x": "dx = y ⊙ (dy − Σ dy ⊙ y)", "keep": None, "bias": None}
    residuals = {"y": "y (the output)"}
    cases = _MASK_CASES

    @staticmethod
    def forward(ctx, x, keep, bias, *, axis):
        y, _, _ = masked_softmax(ctx.xp, x, keep, bias, axis)
        ctx.save(y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """Jacobian-vector product: ∂yᵢ/∂xⱼ = yᵢ(δᵢⱼ − yⱼ), so dx = y ⊙ (dy − ⟨dy, y⟩).

        Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
        Both follow from y = 0 there: dx = 0 · (…) = 0.
        """
        if not ctx.needs_grad[0]:
            return None, None, None
        y = ctx.saved["y"]
        return y * (grad - (grad * y).sum(axis=ctx.axis, keepdims=True)), None, None


@register
class LogSoftmax(Op):
    """y = z − max z − log Σ exp(z − max z) along `axis`: log-probabilities, −inf where masked."""

    name = "log_softmax"
    formula = {"x": "dx = dy − softmax ⊙ Σ dy  (over positions taking part)", "keep": None, "bias": None}
    residuals = {"probs": "P (the softmax probabilities)", "alive": "which positions take part"}
    cases = _MASK_CASES

    @staticmethod
    def forward(ctx, x, keep, bias, *, axis):
        xp = ctx.xp
        probs, m, s = masked_softmax(xp, x, keep, bias, axis)
        z = masked_logits(xp, x, keep, bias)
        alive = z > -xp.inf                                     # positions taking part
        log_s = xp.log(xp.where(s == 0, xp.asarray(1, dtype=s.dtype), s))
        y = xp.where(s == 0, xp.asarray(0, dtype=z.dtype), z - m - log_s)   # NaN rows stay NaN
        ctx.save(probs=probs, alive=alive)
        return y

    @staticmethod
    def backward(ctx, grad):
        """∂yᵢ/∂xⱼ = δᵢⱼ − pⱼ, so dx = dy − p ⊙ Σ dy, the sum over the positions taking part.

        Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
        Here a masked output is the constant −inf, so its dy is dropped before the sum.
        """
        if not ctx.needs_grad[0]:
            return None, None, None
        probs, alive = ctx.saved["probs"], ctx.saved["alive"]
        grad = ctx.xp.where(alive, grad, 0)       # not grad · alive: dy may be ±inf where masked
        return grad - probs * grad.sum(axis=ctx.axis, keepdims=True), None, None
