"""Piecewise functions: abs, sign, the rounding ops (floor, ceil, round, trunc), clip, and the
rounded quotient of two inputs (div with a rounding_mode).

The rounding ops and sign are piecewise constant: their gradient is 0 wherever it exists (PyTorch
returns 0 everywhere, also at the jumps), so they pass no gradient back.
"""

from __future__ import annotations

from .base import Case, Op
from .registry import register

__all__ = ["Abs", "Ceil", "Clip", "Floor", "Round", "RoundedDiv", "Sign", "Trunc"]


class _PiecewiseConstant(Op):
    """The base of sign and the rounding ops (not registered itself): constant between its jumps,
    so its slope is 0 wherever it exists, and taken as 0 at the jumps too, as PyTorch does."""

    formula = {"x": "dx = 0"}
    cases: tuple[Case, ...] = (Case((3, 4)),)

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
class RoundedDiv(Op):
    """c = a / b rounded toward zero ("trunc") or down ("floor", as Python's //).

    PyTorch's ``div(rounding_mode=…)``: integers stay integers, floats are rounded after the
    division (floor as Python's // rounds, which can differ from ⌊a/b⌋ where a/b rounds up)."""

    name = "div_rounded"
    formula = {"a": "da = 0", "b": "db = 0"}
    cases = (Case((3, 4), (3, 4), params={"rounding_mode": "floor"}, domain="nonzero"),
             Case((2, 3), (3,), params={"rounding_mode": "trunc"}, domain="nonzero"))

    @staticmethod
    def forward(ctx, a, b, *, rounding_mode):
        xp = ctx.xp
        if rounding_mode == "floor":
            return xp.floor_divide(a, b)
        if a.dtype.kind == "f":
            return xp.trunc(a / b)
        down = xp.floor_divide(a, b)            # one less than toward zero where the signs differ
        return down + ((down * b != a) & ((a < 0) != (b < 0)))

    @staticmethod
    def backward(ctx, grad):
        """Flat in both inputs between its jumps (the jumps given slope 0, as PyTorch): da = db = 0."""
        return tuple(ctx.xp.zeros_like(grad) if needed else None for needed in ctx.needs_grad)
