"""Elementwise math functions: exp, log, sqrt, rsqrt, log2, exp2, sin, cos, erf, tanh, and
logaddexp (of two inputs, broadcast; its backward returns gradients in the output's shape and the
engine sums them back to each input's shape).
"""

from __future__ import annotations

import math

from .base import BROADCAST_CASES, UNARY_CASES, Case, Op
from .registry import register

__all__ = ["Cos", "Erf", "Exp", "Exp2", "Log", "Log2", "LogAddExp", "Rsqrt", "Sin", "Sqrt", "Tanh", "erf"]


@register
class Exp(Op):
    """y = eˣ."""

    name = "exp"
    formula = {"x": "dx = dy ⊙ y"}
    residuals = {"y": "y (the output)"}
    cases = UNARY_CASES

    @staticmethod
    def forward(ctx, x):
        y = ctx.xp.exp(x)
        ctx.save(y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """∂eˣ/∂x = eˣ = y, so the saved output is reused."""
        return (grad * ctx.saved["y"] if ctx.needs_grad[0] else None,)


@register
class Log(Op):
    """y = ln x."""

    name = "log"
    formula = {"x": "dx = dy / x"}
    residuals = {"x": "x (the input)"}
    cases = (Case((3, 4), domain="positive"),)

    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return ctx.xp.log(x)

    @staticmethod
    def backward(ctx, grad):
        """∂ ln x/∂x = 1/x."""
        return (grad / ctx.saved["x"] if ctx.needs_grad[0] else None,)


@register
class Sqrt(Op):
    """y = √x."""

    name = "sqrt"
    formula = {"x": "dx = dy / (2y)"}
    residuals = {"y": "y (the output)"}
    cases = (Case((3, 4), domain="positive"),)

    @staticmethod
    def forward(ctx, x):
        y = ctx.xp.sqrt(x)
        ctx.save(y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """∂√x/∂x = 1/(2√x) = 1/(2y)."""
        return (grad / (2 * ctx.saved["y"]) if ctx.needs_grad[0] else None,)


@register
class Tanh(Op):
    """y = tanh x."""

    name = "tanh"
    formula = {"x": "dx = dy ⊙ (1 − y²)"}
    residuals = {"y": "y (the output)"}
    cases = UNARY_CASES

    @staticmethod
    def forward(ctx, x):
        y = ctx.xp.tanh(x)
        ctx.save(y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """∂ tanh x/∂x = 1 − tanh² x = 1 − y²."""
        y = ctx.saved["y"]
        return (grad * (1 - y * y) if ctx.needs_grad[0] else None,)


_LN2 = math.log(2)


# Where erf switches from its series to erfc's continued fraction, and how many terms each takes
# for float64 accuracy there (both converge slowest at the switch).
_SWITCH, _SERIES_TERMS, _FRACTION_DEPTH = 2.5, 40, 30


def erf(xp, x):
    """erf x, to about 10⁻¹⁵ in float64, never outside [−1, 1] in any dtype.

    NumPy has no erf (CuPy's is in cupyx), so it is built from the array module's own functions.
    Below |x| = 2.5, the series erf x = 2/√π · e^(−x²) · Σₙ 2ⁿ x^(2n+1) / (1·3·…·(2n+1)): only
    positive terms (no cancellation). Above, erf x = 1 − erfc x with erfc from its continued
    fraction, which is positive, so erf never exceeds 1 (a sum that rounded past 1 made float32
    erf(−10) −1.0000004, and with it x·Φ(x) positive for very negative x). Computed in float64
    and rounded to x's dtype: in float32 the series' e^(−x²) alone is off by x² ulps.
    """
    a = xp.abs(x).astype(xp.float64)
    series = _erf_series(xp, xp.minimum(a, _SWITCH))
    fraction = 1 - _erfc_fraction(xp, xp.maximum(a, _SWITCH))
    return xp.copysign(xp.where(a < _SWITCH, series, fraction), x).astype(x.dtype)


def _erf_series(xp, a):
    a2 = a * a
    term, total = a, a
    for n in range(1, _SERIES_TERMS):
        term = term * (2 * a2 / (2 * n + 1))
        total = total + term
    return (2 / math.sqrt(math.pi)) * xp.exp(-a2) * total


def _erfc_fraction(xp, a):
    """erfc a = 1 − erf a for a ≥ 2.5, by its continued fraction, evaluated from the bottom up:
    erfc a = e^(−a²)/√π · 1/(a + (1/2)/(a + (2/2)/(a + (3/2)/(a + …)))), 30 levels deep.
    Accurate relative to erfc itself (no 1 − erf cancellation); 0 where e^(−a²) underflows."""
    t = a
    for k in range(_FRACTION_DEPTH, 0, -1):
        t = a + (k / 2) / t
    return xp.exp(-(a * a)) / (math.sqrt(math.pi) * t)


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
    cases = UNARY_CASES

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
    cases = UNARY_CASES

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
    cases = UNARY_CASES

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


@register
class LogAddExp(Op):
    """c = log(eᵃ + eᵇ), computed as max(a, b) + log(1 + e^(−|a − b|)) so that it never overflows."""

    name = "logaddexp"
    formula = {"a": "da = dc ⊙ e^(a − c)", "b": "db = dc ⊙ e^(b − c)"}
    residuals = {"a": "A", "b": "B", "c": "C (the output)"}
    cases = BROADCAST_CASES

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
