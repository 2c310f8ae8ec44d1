"""Softmax and log-softmax over one axis, with max-subtraction and boolean or float masks.

The masking rule is the one attention uses (``masking.py``): a boolean ``keep`` marks the
positions that take part (True), a float ``bias`` is added to the logits. Masked positions get
probability 0 and gradient 0; a fully masked row outputs zeros, never NaN. A float16 input is
computed in float32 and the result cast back to float16, as PyTorch accumulates.
"""

from __future__ import annotations

import numpy as np

from ..kernels.reductions import rowsum
from .base import Case, Op, cast_back, single_for_half
from .masking import masked_logits
from .registry import register

__all__ = ["LogSoftmax", "Softmax", "row_max", "softmax_parts"]


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


def row_max(xp, z):
    """max over the last axis, kept as a size-1 column: the same values as ``z.max(-1, keepdims=True)``.

    NumPy reduces a short last axis one short loop per row, slowly. For many rows (at least 32,
    and twice k) of at most k = 64, a transformer's attention rows and vocabulary logits, the rows
    are copied as the columns of a matrix (k, rows) instead, whose maximum down the columns is k
    long vectorised passes: faster than NumPy's max 2.4× at (64, 4, 32, 32), 1.6× at (64, 10),
    7.5× at (2048, 14); slower on fewer or longer rows, which keep it. NaN and −inf propagate as
    in max.
    """
    k = z.shape[-1]
    if xp is not np or k > 64 or z.size < max(32, 2 * k) * max(k, 1):     # k = 0 too
        return z.max(axis=-1, keepdims=True)
    columns = xp.ascontiguousarray(z.reshape(-1, k).T)      # (k, rows): row i is column i of z
    return columns.max(axis=0).reshape(z.shape[:-1] + (1,))


def softmax_parts(xp, z, axis: int, *, overwrite: bool = False):
    """Softmax of the masked logits z along `axis`: (probs, row max m, row sum s of exp(z − m)).

    m and s keep `axis` with size 1; `s > 0` exactly on the rows where some position takes part,
    and log-softmax is z − m − log s there. With `overwrite` the caller gives z up and the
    probabilities are computed in its memory (no second array of z's size).

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
    m = row_max(xp, z) if axis in (-1, z.ndim - 1) else z.max(axis=axis, keepdims=True)
    m = xp.maximum(m, xp.finfo(m.dtype).min)            # −inf (no position) → the lowest float
    e = xp.subtract(z, m, out=z if overwrite else None)
    xp.exp(e, out=e)
    s = rowsum(xp, e) if axis in (-1, e.ndim - 1) else e.sum(axis=axis, keepdims=True)
    e /= xp.maximum(s, 1)       # s ≥ 1 (the max's own term is 1) unless no position: 0, kept 0
    return e, m, s


@register
class Softmax(Op):
    """y = exp(z − max z) / Σ exp(z − max z) along `axis`, z the masked logits."""

    name = "softmax"
    formula = {"x": "dx = y ⊙ (dy − Σ dy ⊙ y)", "keep": None, "bias": None}
    residuals = {"y": "y (the output)"}
    cases = _MASK_CASES

    @staticmethod
    def forward(ctx, x, keep, bias, *, axis):
        if x.dtype == np.float16:       # the denominator Σ exp accumulated in float32
            return cast_back(Softmax.forward(ctx, *single_for_half(x), keep, *single_for_half(bias),
                                             axis=axis), x.dtype)
        z = masked_logits(ctx.xp, x, keep, bias)
        y, _, _ = softmax_parts(ctx.xp, z, axis, overwrite=z is not x)
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
        if x.dtype == np.float16:       # the denominator Σ exp accumulated in float32
            return cast_back(LogSoftmax.forward(ctx, *single_for_half(x), keep, *single_for_half(bias),
                                                axis=axis), x.dtype)
        xp = ctx.xp
        z = masked_logits(xp, x, keep, bias)
        probs, m, s = softmax_parts(xp, z, axis)
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
