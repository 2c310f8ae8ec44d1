"""Softmax and log-softmax over one axis, with max-subtraction and boolean or float masks.

The masking rule is the one attention uses (``masking.py``): a boolean ``keep`` marks the
positions that take part (True), a float ``bias`` is added to the logits. Masked positions get
probability 0 and gradient 0; a fully masked row outputs zeros, never NaN. A float16 input is
computed in float32 and the result cast back to float16, as PyTorch accumulates
(``half_in_single``).
"""

from __future__ import annotations

import numpy as np

from .base import Case, Op
from .masking import masked_logits
from .registry import register

__all__ = ["LogSoftmax", "Softmax", "log_probabilities", "softmax_parts"]


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


def softmax_parts(xp, z, axis: int):
    """Softmax of the masked logits z along `axis`: (probs, row max m, row sum s of exp(z − m)).

    m and s keep `axis` with size 1; `s > 0` exactly on the rows where some position takes part,
    and log-softmax is z − m − log s there.

    The row maximum is subtracted before exp (softmax(z) = softmax(z − m) for any constant m, and
    with m = max z every exp is ≤ 1, so ±1e4 logits stay finite). A row with no position taking
    part has m = −inf; m is replaced by the lowest finite float there so that exp(−inf − m) = 0
    and the row is zeros (its s = 0 is divided as 1). A NaN m stays NaN (maximum propagates it).
    A NaN (or +inf) in a row makes s NaN and so the whole row NaN, as in PyTorch. An empty axis
    gives an empty result (m = s = 0).
    """
    if z.shape[axis] == 0:
        # max() of nothing is undefined; the sum of nothing is 0, shaped as m and s must be.
        stat = z.sum(axis=axis, keepdims=True)
        return xp.exp(z), stat, stat
    m = xp.maximum(z.max(axis=axis, keepdims=True), xp.finfo(z.dtype).min)   # −inf → the lowest float
    e = xp.exp(z - m)
    s = e.sum(axis=axis, keepdims=True)
    return e / xp.where(s == 0, xp.asarray(1, dtype=s.dtype), s), m, s


def log_probabilities(ctx, z, probs, m, s):
    """log-softmax y = z − m − log s from softmax's parts, 0 on a row where nothing takes part;
    saves what LogSoftmax's backward reads."""
    xp = ctx.xp
    alive = z > -xp.inf                                         # positions taking part
    log_s = xp.log(xp.where(s == 0, xp.asarray(1, dtype=s.dtype), s))
    y = xp.where(s == 0, xp.asarray(0, dtype=z.dtype), z - m - log_s)   # NaN rows stay NaN
    ctx.save(probs=probs, alive=alive)
    return y


@register
class Softmax(Op):
    """y = exp(z − max z) / Σ exp(z − max z) along `axis`, z the masked logits."""

    name = "softmax"
    formula = {"x": "dx = y ⊙ (dy − Σ dy ⊙ y)", "keep": None, "bias": None}
    residuals = {"y": "y (the output)"}
    cases = _MASK_CASES

    half_in_single = True       # the denominator Σ exp accumulated in float32

    @staticmethod
    def forward(ctx, x, keep, bias, *, axis):
        y, _, _ = softmax_parts(ctx.xp, masked_logits(ctx.xp, x, keep, bias), axis)
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

    half_in_single = True       # the denominator Σ exp accumulated in float32

    @staticmethod
    def forward(ctx, x, keep, bias, *, axis):
        z = masked_logits(ctx.xp, x, keep, bias)
        return log_probabilities(ctx, z, *softmax_parts(ctx.xp, z, axis))

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
