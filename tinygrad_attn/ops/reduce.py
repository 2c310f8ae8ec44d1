"""Reductions over an axis, a tuple of axes, or everything: sum, mean, max, var.

``axis`` reaches forward already normalised by the Tensor method: ``None`` or a tuple of
non-negative ints. Each backward first puts the reduced axes back (size 1) so that the gradient
broadcasts against the input.
"""

from __future__ import annotations

import math

from . import register
from .base import Case, Op

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


def _mean(x, axis, keepdims):
    """Σ x / n; over an empty axis NaN without NumPy's "Mean of empty slice" warning, as PyTorch."""
    return x.sum(axis=axis, keepdims=keepdims) / x.dtype.type(_count(x.shape, axis))


@register
class Sum(Op):
    """y = Σ x over `axis`."""

    name = "sum"
    formula = {"x": "dx = broadcast(dy)"}
    cases = _AXIS_CASES

    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        ctx.in_shape = x.shape
        return x.sum(axis=axis, keepdims=keepdims)

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

    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        ctx.in_shape = x.shape
        return _mean(x, axis, keepdims)

    @staticmethod
    def backward(ctx, grad):
        """Every element has slope 1/n: dx is dy/n copied along the reduced axes."""
        return (_spread(ctx, grad / _count(ctx.in_shape, ctx.axis)) if ctx.needs_grad[0] else None,)


@register
class Max(Op):
    """y = max x over `axis`.

    At ties the gradient is split equally among the tied maxima (each gets dy/k for k ties),
    so the gradient sums to dy whichever element is taken, as with ``torch.amax``.
    """

    name = "max"
    formula = {"x": "dx = dy ⊙ [x = y] / #ties"}
    residuals = {"is_max": "where x equals the max"}
    cases = _AXIS_CASES

    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        ctx.in_shape = x.shape
        y = x.max(axis=axis, keepdims=True)
        ctx.save(is_max=x == y)
        # squeeze drops exactly the reduced axes: they have size 1 (axis None: every axis).
        return y if keepdims else y.squeeze(axis=axis)

    @staticmethod
    def backward(ctx, grad):
        """dx = dy where x is the maximum, 0 elsewhere; k tied maxima share dy as dy/k each."""
        if not ctx.needs_grad[0]:
            return (None,)
        is_max = ctx.saved["is_max"]
        ties = is_max.sum(axis=ctx.axis, keepdims=True)
        return (_keep_axes(ctx, grad) * is_max / ties,)


@register
class Var(Op):
    """y = (1/n) Σ (x − μ)², the population variance (ddof 0) over `axis`."""

    name = "var"
    formula = {"x": "dx = dy ⊙ 2(x − μ) / n"}
    residuals = {"centered": "x − mean"}
    cases = _AXIS_CASES + (Case((5,), params={"axis": (0,), "keepdims": False}),)

    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        ctx.in_shape = x.shape
        centered = x - _mean(x, axis, keepdims=True)
        ctx.save(centered=centered)
        return _mean(centered * centered, axis, keepdims)

    @staticmethod
    def backward(ctx, grad):
        """∂y/∂xᵢ = 2(xᵢ − μ)/n; the path through μ adds −(2/n²)Σⱼ(xⱼ − μ) = 0."""
        if not ctx.needs_grad[0]:
            return (None,)
        # n = 0 (an empty axis): the input has no element, so the 0-size gradient is what counts,
        # and max(n, 1) only avoids dividing by zero on the way to it.
        n = _count(ctx.in_shape, ctx.axis)
        return (_keep_axes(ctx, grad) * ctx.saved["centered"] * (2 / max(n, 1)),)

