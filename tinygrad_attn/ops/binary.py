"""Elementwise functions of two or three inputs, with broadcasting: maximum, minimum, lerp, logaddexp.

As for arithmetic, backward returns gradients in the output's shape and the engine sums them back
to each input's shape.
"""

from __future__ import annotations

import numpy as np

from .base import Case, Op
from .registry import register

__all__ = ["Lerp", "LogAddExp", "Maximum", "Minimum"]


_BROADCAST_CASES = (Case((3, 4), (3, 4)), Case((2, 3, 4), (4,)), Case((3, 1), (1, 5)))


def _shares(ctx, grad, a_wins, tie):
    """dy to the winner of each element, dy/2 to both at a tie (as PyTorch's maximum)."""
    xp = ctx.xp
    half = grad * 0.5
    return (xp.where(tie, half, grad * a_wins) if ctx.needs_grad[0] else None,
            xp.where(tie, half, grad * ~a_wins) if ctx.needs_grad[1] else None)


@register
class Maximum(Op):
    """c = max(a, b) elementwise."""

    name = "maximum"
    formula = {"a": "da = dc ⊙ [a > b] (+ dc/2 where a = b)", "b": "db = dc ⊙ [b > a] (+ dc/2 where a = b)"}
    residuals = {"a_wins": "where a > b", "tie": "where a = b"}
    cases = _BROADCAST_CASES

    @staticmethod
    def forward(ctx, a, b):
        ctx.save(a_wins=a > b, tie=a == b)
        return ctx.xp.maximum(a, b)

    @staticmethod
    def backward(ctx, grad):
        """c is whichever input is larger, so that one has slope 1 and the other 0; at a tie both
        are the maximum and share dc equally (the mean of the two one-sided slopes)."""
        return _shares(ctx, grad, ctx.saved["a_wins"], ctx.saved["tie"])


@register
class Minimum(Op):
    """c = min(a, b) elementwise."""

    name = "minimum"
    formula = {"a": "da = dc ⊙ [a < b] (+ dc/2 where a = b)", "b": "db = dc ⊙ [b < a] (+ dc/2 where a = b)"}
    residuals = {"a_wins": "where a < b", "tie": "where a = b"}
    cases = _BROADCAST_CASES

    @staticmethod
    def forward(ctx, a, b):
        ctx.save(a_wins=a < b, tie=a == b)
        return ctx.xp.minimum(a, b)

    @staticmethod
    def backward(ctx, grad):
        """c is whichever input is smaller, so that one has slope 1 and the other 0; at a tie both
        share dc equally."""
        return _shares(ctx, grad, ctx.saved["a_wins"], ctx.saved["tie"])


@register
class Lerp(Op):
    """y = start + weight ⊙ (end − start), linear interpolation."""

    name = "lerp"
    formula = {"start": "dstart = dy ⊙ (1 − weight)", "end": "dend = dy ⊙ weight",
               "weight": "dweight = dy ⊙ (end − start)"}
    residuals = {"start": "start", "end": "end", "weight": "weight"}
    cases = (Case((3, 4), (3, 4), (3, 4)), Case((2, 3), (3,), (2, 1)), Case((3,), (3,), np.array(0.25)))

    @staticmethod
    def forward(ctx, start, end, weight):
        ctx.save(start=start, end=end, weight=weight)
        return start + weight * (end - start)

    @staticmethod
    def backward(ctx, grad):
        """y = (1 − w)·start + w·end is linear in each endpoint; ∂y/∂w = end − start."""
        start, end, weight = ctx.saved["start"], ctx.saved["end"], ctx.saved["weight"]
        return (grad * (1 - weight) if ctx.needs_grad[0] else None,
                grad * weight if ctx.needs_grad[1] else None,
                grad * (end - start) if ctx.needs_grad[2] else None)


@register
class LogAddExp(Op):
    """c = log(eᵃ + eᵇ), computed as max(a, b) + log(1 + e^(−|a − b|)) so that it never overflows."""

    name = "logaddexp"
    formula = {"a": "da = dc ⊙ e^(a − c)", "b": "db = dc ⊙ e^(b − c)"}
    residuals = {"a": "A", "b": "B", "c": "C (the output)"}
    cases = _BROADCAST_CASES

    @staticmethod
    def forward(ctx, a, b):
        c = ctx.xp.logaddexp(a, b)
        ctx.save(a=a, b=b, c=c)
        return c

    @staticmethod
    def backward(ctx, grad):
        """∂c/∂a = eᵃ/(eᵃ + eᵇ) = e^(a − c): a two-way softmax, the weights summing to 1."""
        xp, c = ctx.xp, ctx.saved["c"]
        return (grad * xp.exp(ctx.saved["a"] - c) if ctx.needs_grad[0] else None,
                grad * xp.exp(ctx.saved["b"] - c) if ctx.needs_grad[1] else None)
