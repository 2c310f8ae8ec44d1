"""Arithmetic with NumPy broadcasting: add, sub, mul, div, pow, neg, maximum, minimum, lerp.

Backward returns gradients in the broadcast (output) shape; the engine sums them back to each
input's shape.
"""

from __future__ import annotations

import numpy as np

from .base import BROADCAST_CASES, UNARY_CASES, Case, Op
from .registry import register

__all__ = ["Add", "Cast", "Div", "Lerp", "Maximum", "Minimum", "Mul", "Neg", "Pow", "Sub"]


@register
class Cast(Op):
    """y = x in another dtype (what promotion does to an operand: a 0-d float64 beside float32)."""

    name = "cast"
    formula = {"x": "dx = dy, in x's dtype"}
    cases = (Case((3, 4), params={"dtype": np.dtype(np.float64)}),)

    @staticmethod
    def forward(ctx, x, *, dtype):
        ctx.in_dtype = x.dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, grad):
        """The identity on values: the gradient passes, converted back to the input's dtype."""
        return (grad.astype(ctx.in_dtype, copy=False) if ctx.needs_grad[0] else None,)


@register
class Add(Op):
    """c = a + b."""

    name = "add"
    formula = {"a": "da = dc", "b": "db = dc"}
    cases = BROADCAST_CASES

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        """∂c/∂a = ∂c/∂b = 1, so both inputs receive the incoming gradient unchanged."""
        return (grad if ctx.needs_grad[0] else None, grad if ctx.needs_grad[1] else None)


@register
class Sub(Op):
    """c = a − b."""

    name = "sub"
    formula = {"a": "da = dc", "b": "db = −dc"}
    cases = BROADCAST_CASES

    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, grad):
        """∂c/∂a = 1, ∂c/∂b = −1."""
        return (grad if ctx.needs_grad[0] else None, -grad if ctx.needs_grad[1] else None)


@register
class Mul(Op):
    """c = a ⊙ b."""

    name = "mul"
    formula = {"a": "da = dc ⊙ b", "b": "db = dc ⊙ a"}
    residuals = {"a": "A", "b": "B"}
    cases = BROADCAST_CASES

    @staticmethod
    def forward(ctx, a, b):
        ctx.save(a=a, b=b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        """∂c/∂a = b, ∂c/∂b = a (product rule, elementwise)."""
        a, b = ctx.saved["a"], ctx.saved["b"]
        return (grad * b if ctx.needs_grad[0] else None,
                grad * a if ctx.needs_grad[1] else None)


@register
class Div(Op):
    """c = a / b."""

    name = "div"
    formula = {"a": "da = dc / b", "b": "db = −dc ⊙ a / b²"}
    residuals = {"a": "A", "b": "B"}
    cases = (Case((3, 4), (3, 4), domain="nonzero"), Case((2, 3), (3,), domain="nonzero"))

    @staticmethod
    def forward(ctx, a, b):
        ctx.save(a=a, b=b)
        return a / b

    @staticmethod
    def backward(ctx, grad):
        """∂c/∂a = 1/b, ∂c/∂b = −a/b²."""
        a, b = ctx.saved["a"], ctx.saved["b"]
        return (grad / b if ctx.needs_grad[0] else None,
                -grad * a / (b * b) if ctx.needs_grad[1] else None)


@register
class Pow(Op):
    """c = a ** b, differentiable in both the base and the exponent."""

    name = "pow"
    formula = {
        "a": "da = dc ⊙ b ⊙ a^(b−1), 0 where b = 0",
        "b": "db = dc ⊙ c ⊙ ln a, 0 where a = 0 and b ≥ 0",
    }
    residuals = {"a": "A", "b": "B", "c": "C (the output)"}
    cases = (Case((3, 4), (3, 4), domain="positive"), Case((3, 4), np.array(2.0)),
             Case((3, 4), np.array(-1.5), domain="positive"), Case((2, 3), (3,), domain="positive"))

    @staticmethod
    def forward(ctx, a, b):
        c = a ** b
        ctx.save(a=a, b=b, c=c)
        return c

    @staticmethod
    def backward(ctx, grad):
        """∂c/∂a = b·a^(b−1); ∂c/∂b = a^b·ln a (defined for a > 0).

        At the boundary, as PyTorch: where b = 0, c = a⁰ = 1 does not depend on a, so ∂c/∂a = 0
        (not 0·0⁻¹ = NaN at a = 0); where a = 0 and b ≥ 0, ∂c/∂b is taken as 0 (c·ln a = 0·(−∞)).
        """
        xp = ctx.xp
        a, b, c = ctx.saved["a"], ctx.saved["b"], ctx.saved["c"]
        zero = xp.asarray(0, dtype=grad.dtype)
        return (xp.where(b == 0, zero, grad * b * a ** (b - 1)) if ctx.needs_grad[0] else None,
                xp.where((a == 0) & (b >= 0), zero, grad * c * xp.log(a)) if ctx.needs_grad[1] else None)


@register
class Neg(Op):
    """y = −x."""

    name = "neg"
    formula = {"x": "dx = −dy"}
    cases = UNARY_CASES

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, grad):
        """∂y/∂x = −1."""
        return (-grad if ctx.needs_grad[0] else None,)


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
    cases = BROADCAST_CASES

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
    cases = BROADCAST_CASES

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
