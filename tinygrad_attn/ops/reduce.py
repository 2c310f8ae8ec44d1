"""Reductions over an axis, a tuple of axes, or everything: sum, mean, max, min, var, prod,
logsumexp; and cumsum, the running sum along one axis.

A float16 input is reduced in float32 and the result cast back to float16 (as PyTorch
accumulates): a float16 sum of a thousand 100s is 10⁵, past float16's largest number 65504, so a
mean or variance accumulated in float16 would be inf.

``axis`` reaches forward already normalised by the Tensor method: ``None`` or a tuple of
non-negative ints. Each backward first puts the reduced axes back (size 1) so that the gradient
broadcasts against the input.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Case, Op
from .registry import register

__all__ = ["CumSum", "LogSumExp", "Max", "Mean", "Min", "Prod", "Std", "Sum", "Var"]

_AXIS_CASES = (Case((3, 4), params={"axis": None, "keepdims": False}),
               Case((3, 4), params={"axis": (1,), "keepdims": False}),
               Case((2, 3, 4), params={"axis": (0, 2), "keepdims": True}),
               Case((2, 3, 4), params={"axis": (1,), "keepdims": False}))


def _keep_axes(ctx, grad):
    """The gradient with the reduced axes restored as size-1 axes (undoing keepdims=False), so
    that it broadcasts against the input."""
    if ctx.keepdims:
        return grad
    axes = range(len(ctx.in_shape)) if ctx.axis is None else ctx.axis
    return grad.reshape([1 if i in axes else n for i, n in enumerate(ctx.in_shape)])


def _spread(ctx, grad):
    """The gradient copied along the reduced axes: the input's shape (a broadcast view)."""
    return ctx.xp.broadcast_to(_keep_axes(ctx, grad), ctx.in_shape)


def _count(shape, axis):
    """How many elements one output element reduces."""
    return math.prod(shape) if axis is None else math.prod(shape[i] for i in axis)


def _mean(x, axis, keepdims, correction=0):
    """Σ x / max(0, n − correction), as PyTorch: over an empty axis, or with correction ≥ n, NaN
    (0/0) or inf, without NumPy's "Mean of empty slice" warning."""
    return x.sum(axis=axis, keepdims=keepdims) / x.dtype.type(max(_count(x.shape, axis) - correction, 0))


@register
class Sum(Op):
    """y = Σ x over `axis`, accumulated and returned in `dtype` when one is given."""

    name = "sum"
    formula = {"x": "dx = broadcast(dy)"}
    cases = _AXIS_CASES + (Case((3, 4), params={"axis": (1,), "keepdims": False, "dtype": np.float64}),)

    half_in_single = True       # accumulated in float32 for float16

    @staticmethod
    def forward(ctx, x, *, axis, keepdims, dtype=None):
        ctx.in_shape = x.shape
        return x.sum(axis=axis, keepdims=keepdims, dtype=dtype)

    @staticmethod
    def backward(ctx, grad):
        """Every summed element has slope 1: dx is dy copied along the reduced axes."""
        return (_spread(ctx, grad) if ctx.needs_grad[0] else None,)


@register
class Mean(Op):
    """y = (1/n) Σ x over `axis`, n the number of elements reduced."""

    name = "mean"
    formula = {"x": "dx = broadcast(dy) / n"}
    cases = _AXIS_CASES

    half_in_single = True       # accumulated in float32 for float16

    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        ctx.in_shape = x.shape
        return _mean(x, axis, keepdims)

    @staticmethod
    def backward(ctx, grad):
        """Every element has slope 1/n: dx is dy/n copied along the reduced axes."""
        return (_spread(ctx, grad / _count(ctx.in_shape, ctx.axis)) if ctx.needs_grad[0] else None,)


def _extremum(ctx, x, y, axis, keepdims):
    """Max's and min's forward once `y` (x's extremum over `axis`, axes kept) is known: save where
    x equals it, and drop the reduced axes unless `keepdims` (squeeze drops exactly those: they
    have size 1; axis None: every axis)."""
    ctx.in_shape = x.shape
    ctx.save(at_extremum=x == y)
    return y if keepdims else y.squeeze(axis=axis)


def _shared_among_ties(ctx, grad):
    """Max's and min's backward: dy goes to where x equals the extremum, k ties getting dy/k each."""
    if not ctx.needs_grad[0]:
        return (None,)
    at = ctx.saved["at_extremum"]
    return (_keep_axes(ctx, grad) * at / at.sum(axis=ctx.axis, keepdims=True),)


@register
class Max(Op):
    """y = max x over `axis`.

    At ties the gradient is split equally among the tied maxima (each gets dy/k for k ties),
    so the gradient sums to dy whichever element is taken, as with ``torch.amax``.
    """

    name = "max"
    formula = {"x": "dx = dy ⊙ [x = y] / #ties"}
    residuals = {"at_extremum": "where x equals the max"}
    cases = _AXIS_CASES

    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        return _extremum(ctx, x, x.max(axis=axis, keepdims=True), axis, keepdims)

    @staticmethod
    def backward(ctx, grad):
        """dx = dy where x is the maximum, 0 elsewhere; k tied maxima share dy as dy/k each."""
        return _shared_among_ties(ctx, grad)


def _centered_and_variance(ctx, x, axis, keepdims, correction):
    """x − μ and Σ (x − μ)² / max(0, n − correction) over `axis` (in float32 for float16), for var
    and std; records the input's shape and n − correction on ctx for their backward."""
    ctx.in_shape = x.shape
    ctx.divisor = _count(x.shape, axis) - correction
    centered = x - _mean(x, axis, keepdims=True)
    return centered, _mean(centered * centered, axis, keepdims, correction)


@register
class Var(Op):
    """y = Σ (x − μ)² / max(0, n − correction) over `axis`: correction 1 (``Tensor.var``'s default,
    as PyTorch's) is the unbiased sample variance, 0 the population variance."""

    name = "var"
    formula = {"x": "dx = dy ⊙ 2(x − μ) / (n − correction)"}
    residuals = {"centered": "x − mean"}
    cases = _AXIS_CASES + (Case((5,), params={"axis": (0,), "keepdims": False}),
                           Case((3, 4), params={"axis": (1,), "keepdims": True, "correction": 1}))

    half_in_single = True       # accumulated in float32 for float16

    @staticmethod
    def forward(ctx, x, *, axis, keepdims, correction=0):
        centered, variance = _centered_and_variance(ctx, x, axis, keepdims, correction)
        ctx.save(centered=centered)
        return variance

    @staticmethod
    def backward(ctx, grad):
        """∂y/∂xᵢ = 2(xᵢ − μ)/(n − correction); the path through μ adds a multiple of
        Σⱼ(xⱼ − μ) = 0."""
        if not ctx.needs_grad[0]:
            return (None,)
        # n − correction ≤ 0 (an empty axis, or correction ≥ n): no finite slope; the input has
        # no element, or its gradient is inf/NaN as the forward's value (as PyTorch).
        scale = 2 / ctx.divisor if ctx.divisor > 0 else float("inf")
        return (_keep_axes(ctx, grad) * ctx.saved["centered"] * scale,)


@register
class Std(Op):
    """y = √var = √(Σ (x − μ)² / max(0, n − correction)) over `axis`; float16 is computed in float32
    up to the root (a float16 variance of [300, −300, 0] is 90000, past float16's 65504)."""

    name = "std"
    formula = {"x": "dx = dy ⊙ (x − μ) / ((n − correction) · y)"}
    residuals = {"centered": "x − mean", "y": "y (the output, in float32 for float16)"}
    cases = _AXIS_CASES + (Case((3, 4), params={"axis": (1,), "keepdims": True, "correction": 1}),)

    half_in_single = True       # accumulated in float32 for float16

    @staticmethod
    def forward(ctx, x, *, axis, keepdims, correction=0):
        centered, variance = _centered_and_variance(ctx, x, axis, keepdims, correction)
        y = ctx.xp.sqrt(variance)
        ctx.save(centered=centered, y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """d√v = dv / (2√v), and dv/dxᵢ = 2(xᵢ − μ)/(n − correction) (see ``Var``), so
        ∂y/∂xᵢ = (xᵢ − μ)/((n − correction) · y); computed in float32 for float16, cast back."""
        if not ctx.needs_grad[0]:
            return (None,)
        scale = 1 / ctx.divisor if ctx.divisor > 0 else float("inf")
        keep = _keep_axes(ctx, ctx.saved["y"]) if not ctx.keepdims else ctx.saved["y"]
        dx = _keep_axes(ctx, grad) * ctx.saved["centered"] * scale / keep
        return (dx,)


@register
class Min(Op):
    """y = min x over `axis`.

    At ties the gradient is split equally among the tied minima, as for ``max``.
    """

    name = "min"
    formula = {"x": "dx = dy ⊙ [x = y] / #ties"}
    residuals = {"at_extremum": "where x equals the min"}
    cases = _AXIS_CASES

    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        return _extremum(ctx, x, x.min(axis=axis, keepdims=True), axis, keepdims)

    @staticmethod
    def backward(ctx, grad):
        """dx = dy where x is the minimum, 0 elsewhere; k tied minima share dy as dy/k each."""
        return _shared_among_ties(ctx, grad)


@register
class Prod(Op):
    """y = Π x over `axis`."""

    name = "prod"
    formula = {"x": "dx = dy ⊙ Π_{j≠i} x_j  (the product of the others)"}
    residuals = {"x": "x (the input)"}
    cases = _AXIS_CASES

    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        ctx.in_shape = x.shape
        ctx.save(x=x)
        return x.prod(axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        """∂(Π x)/∂xᵢ = Π_{j≠i} xⱼ, taken as the product of the elements before i times the
        product of those after it (running products from both ends), not as y/xᵢ, which is 0/0
        when xᵢ = 0."""
        if not ctx.needs_grad[0]:
            return (None,)
        return (_keep_axes(ctx, grad) * _product_of_others(ctx.xp, ctx.saved["x"], ctx.axis),)


def _product_of_others(xp, x, axis):
    """For each element, the product of the other elements of its reduction."""
    axes = tuple(range(x.ndim)) if axis is None else axis
    kept = [i for i in range(x.ndim) if i not in axes]
    order = kept + list(axes)
    moved = x.transpose(order)
    n = _count(moved.shape, tuple(range(len(kept), x.ndim)))
    if n == 0:
        return xp.zeros_like(x)
    rows = moved.reshape(moved.shape[:len(kept)] + (n,))
    ones = xp.ones(rows.shape[:-1] + (1,), dtype=x.dtype)
    before = xp.cumprod(xp.concatenate([ones, rows[..., :-1]], axis=-1), axis=-1)
    after = xp.flip(xp.cumprod(xp.flip(xp.concatenate([rows[..., 1:], ones], axis=-1), axis=-1),
                               axis=-1), axis=-1)
    inverse = sorted(range(x.ndim), key=order.__getitem__)
    return (before * after).reshape(moved.shape).transpose(inverse)


@register
class LogSumExp(Op):
    """y = m + log Σ e^(x − m) over `axis`, m = max x: log Σ eˣ without overflow."""

    name = "logsumexp"
    formula = {"x": "dx = dy ⊙ softmax(x)"}
    residuals = {"probs": "softmax(x) over the reduced axes"}
    cases = _AXIS_CASES

    half_in_single = True       # accumulated in float32 for float16

    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        xp = ctx.xp
        ctx.in_shape = x.shape
        # an empty axis has no maximum: m = 0 there, so y = log 0 = −inf, as PyTorch
        m = x.max(axis=axis, keepdims=True) if x.size else xp.zeros_like(x.sum(axis=axis, keepdims=True))
        m = xp.where(xp.isfinite(m), m, xp.asarray(0, dtype=m.dtype))  # a row of −inf: m = 0
        e = xp.exp(x - m)
        s = e.sum(axis=axis, keepdims=True)
        ctx.save(probs=e / xp.where(s == 0, xp.asarray(1, dtype=s.dtype), s))
        y = m + xp.log(s)
        return y if keepdims else y.squeeze(axis=axis)

    @staticmethod
    def backward(ctx, grad):
        """∂/∂xᵢ log Σⱼ e^(xⱼ) = e^(xᵢ)/Σⱼ e^(xⱼ) = softmax(x)ᵢ (0 across a row of −inf)."""
        return (_keep_axes(ctx, grad) * ctx.saved["probs"] if ctx.needs_grad[0] else None,)


@register
class CumSum(Op):
    """yᵢ = Σ_{j ≤ i} xⱼ along `axis` (the running sum)."""

    name = "cumsum"
    formula = {"x": "dx = reverse running sum of dy: dxⱼ = Σ_{i ≥ j} dyᵢ"}
    cases = (Case((5,), params={"axis": 0}), Case((3, 4), params={"axis": 1}),
             Case((3, 4), params={"axis": 0}))

    half_in_single = True       # accumulated in float32 for float16

    @staticmethod
    def forward(ctx, x, *, axis):
        return ctx.xp.cumsum(x, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        """xⱼ appears in every yᵢ with i ≥ j, so dxⱼ = Σ_{i ≥ j} dyᵢ: a running sum from the end."""
        if not ctx.needs_grad[0]:
            return (None,)
        xp = ctx.xp
        return (xp.flip(xp.cumsum(xp.flip(grad, axis=ctx.axis), axis=ctx.axis), axis=ctx.axis),)

