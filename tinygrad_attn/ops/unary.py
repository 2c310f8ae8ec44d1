"""Elementwise math functions of one input: abs, sign, clip, rsqrt, log2, exp2, sin, cos, erf and
the rounding ops (floor, ceil, round, trunc).

The rounding ops and sign are piecewise constant: their gradient is 0 wherever it exists (PyTorch
returns 0 everywhere, also at the jumps), so they pass no gradient back.
"""

from __future__ import annotations

import math

from .base import Case, Op
from .registry import register

__all__ = ["Abs", "Ceil", "Clip", "Cos", "Erf", "Exp2", "Floor", "Log2", "Round", "Rsqrt", "Sign", "Sin",
           "Trunc", "erf"]


_UNARY_CASES = (Case((3, 4)), Case((2, 3, 5)), Case(()))
_LN2 = math.log(2)


def erf(xp, x):
    """erf x = 2/√π · e^(−x²) · Σₙ 2ⁿ x^(2n+1) / (1·3·…·(2n+1)), to float64 accuracy.

    NumPy has no erf (CuPy's is in cupyx), so it is built from the array module's own functions.
    The series has only positive terms (no cancellation); |x| is capped at 6, where erf is 1 to
    within 2·10⁻¹⁷, and 130 terms then bring the error below 10⁻¹⁴.
    """
    a = xp.minimum(xp.abs(x), 6.0)
    a2 = a * a
    term, total = a, a
    for n in range(1, 130):
        term = term * (2 * a2 / (2 * n + 1))
        total = total + term
    return (xp.sign(x) * (2 / math.sqrt(math.pi)) * xp.exp(-a2) * total).astype(x.dtype)


class _PiecewiseConstant(Op):
    """The base of sign and the rounding ops (not registered itself): constant between its jumps,
    so its slope is 0 wherever it exists, and taken as 0 at the jumps too, as PyTorch does."""

    formula = {"x": "dx = 0"}
    cases = (Case((3, 4)),)

    @staticmethod
    def backward(ctx, grad):
        """dx = 0: the function is flat between its jumps (and the jumps are given slope 0)."""
        return (ctx.xp.zeros_like(grad) if ctx.needs_grad[0] else None,)


@register
class Abs(Op):
    """y = |x|."""

    name = "abs"
    formula = {"x": "dx = dy ⊙ sign(x)"}
    residuals = {"x": "x (the input)"}
    cases = (Case((3, 4), domain="nonzero"),)

    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return ctx.xp.abs(x)

    @staticmethod
    def backward(ctx, grad):
        """d|x|/dx = sign(x): +1 for x > 0, −1 for x < 0, and 0 at x = 0 (as PyTorch)."""
        return (grad * ctx.xp.sign(ctx.saved["x"]) if ctx.needs_grad[0] else None,)


@register
class Sign(_PiecewiseConstant):
    """y = sign(x): −1, 0 or +1."""

    name = "sign"
    cases = (Case((3, 4), domain="nonzero"),)

    @staticmethod
    def forward(ctx, x):
        return ctx.xp.sign(x)


@register
class Floor(_PiecewiseConstant):
    """y = ⌊x⌋, the largest integer ≤ x."""

    name = "floor"

    @staticmethod
    def forward(ctx, x):
        return ctx.xp.floor(x)


@register
class Ceil(_PiecewiseConstant):
    """y = ⌈x⌉, the smallest integer ≥ x."""

    name = "ceil"

    @staticmethod
    def forward(ctx, x):
        return ctx.xp.ceil(x)


@register
class Round(_PiecewiseConstant):
    """y = x rounded to `decimals` places, halves to even (as NumPy and PyTorch)."""

    name = "round"
    cases = (Case((3, 4), params={"decimals": 0}), Case((3, 4), params={"decimals": 2}))

    @staticmethod
    def forward(ctx, x, *, decimals):
        return ctx.xp.round(x, decimals)


@register
class Trunc(_PiecewiseConstant):
    """y = x with its fractional part dropped (rounded toward 0)."""

    name = "trunc"

    @staticmethod
    def forward(ctx, x):
        return ctx.xp.trunc(x)


@register
class Clip(Op):
    """y = min(max(x, min), max); either bound may be None (no bound on that side)."""

    name = "clip"
    formula = {"x": "dx = dy ⊙ [min ≤ x ≤ max]"}
    residuals = {"inside": "where min ≤ x ≤ max"}
    cases = (Case((3, 4), params={"min": -0.5, "max": 0.5}), Case((3, 4), params={"min": 0.2, "max": None}),
             Case((2, 3), params={"min": None, "max": -0.1}))

    @staticmethod
    def forward(ctx, x, *, min, max):       # noqa: A002 (PyTorch's argument names)
        xp = ctx.xp
        y = x if min is None else xp.maximum(x, xp.asarray(min, dtype=x.dtype))
        y = y if max is None else xp.minimum(y, xp.asarray(max, dtype=x.dtype))
        ctx.save(inside=y == x)
        return y

    @staticmethod
    def backward(ctx, grad):
        """Slope 1 where x lies within the bounds (the bounds included, as PyTorch's clamp), 0 where
        it was replaced by a bound."""
        return (grad * ctx.saved["inside"] if ctx.needs_grad[0] else None,)


@register
class Rsqrt(Op):
    """y = 1/√x."""

    name = "rsqrt"
    formula = {"x": "dx = −½ dy ⊙ y³"}
    residuals = {"y": "y (the output)"}
    cases = (Case((3, 4), domain="positive"),)

    @staticmethod
    def forward(ctx, x):
        y = 1 / ctx.xp.sqrt(x)
        ctx.save(y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """d x^(−½)/dx = −½ x^(−3/2) = −½ y³."""
        y = ctx.saved["y"]
        return (grad * (-0.5 * y * y * y) if ctx.needs_grad[0] else None,)


@register
class Log2(Op):
    """y = log₂ x."""

    name = "log2"
    formula = {"x": "dx = dy / (x ln 2)"}
    residuals = {"x": "x (the input)"}
    cases = (Case((3, 4), domain="positive"),)

    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return ctx.xp.log2(x)

    @staticmethod
    def backward(ctx, grad):
        """log₂ x = ln x / ln 2, so its slope is 1/(x ln 2)."""
        return (grad / (ctx.saved["x"] * _LN2) if ctx.needs_grad[0] else None,)


@register
class Exp2(Op):
    """y = 2ˣ."""

    name = "exp2"
    formula = {"x": "dx = dy ⊙ y ln 2"}
    residuals = {"y": "y (the output)"}
    cases = _UNARY_CASES

    @staticmethod
    def forward(ctx, x):
        y = ctx.xp.exp2(x)
        ctx.save(y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """2ˣ = e^(x ln 2), so its slope is 2ˣ ln 2 = y ln 2."""
        return (grad * ctx.saved["y"] * _LN2 if ctx.needs_grad[0] else None,)


@register
class Sin(Op):
    """y = sin x."""

    name = "sin"
    formula = {"x": "dx = dy ⊙ cos x"}
    residuals = {"x": "x (the input)"}
    cases = _UNARY_CASES

    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return ctx.xp.sin(x)

    @staticmethod
    def backward(ctx, grad):
        """d sin x/dx = cos x."""
        return (grad * ctx.xp.cos(ctx.saved["x"]) if ctx.needs_grad[0] else None,)


@register
class Cos(Op):
    """y = cos x."""

    name = "cos"
    formula = {"x": "dx = −dy ⊙ sin x"}
    residuals = {"x": "x (the input)"}
    cases = _UNARY_CASES

    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return ctx.xp.cos(x)

    @staticmethod
    def backward(ctx, grad):
        """d cos x/dx = −sin x."""
        return (grad * -ctx.xp.sin(ctx.saved["x"]) if ctx.needs_grad[0] else None,)


@register
class Erf(Op):
    """y = erf x = 2/√π ∫₀ˣ e^(−t²) dt."""

    name = "erf"
    formula = {"x": "dx = dy ⊙ 2/√π · e^(−x²)"}
    residuals = {"x": "x (the input)"}
    cases = (Case((3, 4)), Case(()))

    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return erf(ctx.xp, x)

    @staticmethod
    def backward(ctx, grad):
        """The derivative of an integral by its upper limit is the integrand: 2/√π · e^(−x²)."""
        if not ctx.needs_grad[0]:
            return (None,)
        x = ctx.saved["x"]
        return (grad * (2 / math.sqrt(math.pi)) * ctx.xp.exp(-(x * x)),)
