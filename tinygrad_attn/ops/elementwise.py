"""Elementwise ops with NumPy broadcasting: arithmetic and the activation functions.

Backward returns gradients in the broadcast (output) shape; the engine sums them back to each
input's shape.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Case, Op
from .registry import register

__all__ = ["Add", "Div", "Exp", "Gelu", "Log", "Mul", "Neg", "Pow", "Relu", "Sigmoid", "Silu", "Sqrt",
           "Sub", "Tanh"]


_BROADCAST_CASES = (Case((3, 4), (3, 4)), Case((2, 3, 4), (4,)), Case((3, 1), (1, 5)), Case((), (2, 3)))
_UNARY_CASES = (Case((3, 4)), Case((2, 3, 5)), Case(()))        # () : a 0-d tensor


@register
class Add(Op):
    """c = a + b."""

    name = "add"
    formula = {"a": "da = dc", "b": "db = dc"}
    cases = _BROADCAST_CASES

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
    cases = _BROADCAST_CASES

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
    cases = _BROADCAST_CASES

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
    cases = _UNARY_CASES

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, grad):
        """∂y/∂x = −1."""
        return (-grad if ctx.needs_grad[0] else None,)


@register
class Exp(Op):
    """y = eˣ."""

    name = "exp"
    formula = {"x": "dx = dy ⊙ y"}
    residuals = {"y": "y (the output)"}
    cases = _UNARY_CASES

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
    cases = _UNARY_CASES

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


@register
class Sigmoid(Op):
    """y = σ(x) = 1 / (1 + e⁻ˣ), computed without overflow for large |x|."""

    name = "sigmoid"
    formula = {"x": "dx = dy ⊙ y ⊙ (1 − y)"}
    residuals = {"y": "y (the output)"}
    cases = _UNARY_CASES

    @staticmethod
    def forward(ctx, x):
        # σ(x) = ½(1 + tanh(x/2)) never overflows, unlike 1/(1 + exp(−x)) for x ≪ 0.
        y = 0.5 * (1 + ctx.xp.tanh(0.5 * x))
        ctx.save(y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """σ'(x) = σ(x)(1 − σ(x)) = y(1 − y)."""
        y = ctx.saved["y"]
        return (grad * y * (1 - y) if ctx.needs_grad[0] else None,)


@register
class Silu(Op):
    """y = x · σ(x) (SiLU, also called swish): the gate of a SwiGLU MLP."""

    name = "silu"
    formula = {"x": "dx = dy ⊙ s ⊙ (1 + x(1 − s)), s = σ(x)"}
    residuals = {"x": "x (the input)", "s": "σ(x)"}
    cases = _UNARY_CASES

    @staticmethod
    def forward(ctx, x):
        # σ(x) = ½(1 + tanh ½x), without overflow (see Sigmoid), each step in place on one array
        xp = ctx.xp
        s = xp.multiply(x, 0.5, out=xp.empty_like(x))   # an array also for 0-d x
        xp.tanh(s, out=s)
        s += 1
        s *= 0.5
        ctx.save(x=x, s=s)
        return x * s

    @staticmethod
    def backward(ctx, grad):
        """d(x·σ(x))/dx = σ(x) + x·σ(x)(1 − σ(x)) = s(1 + x(1 − s)) (product rule, σ' = σ(1 − σ))."""
        if not ctx.needs_grad[0]:
            return (None,)
        xp, x, s = ctx.xp, ctx.saved["x"], ctx.saved["s"]
        slope = xp.subtract(1, s, out=xp.empty_like(s))
        slope *= x
        slope += 1                                      # 1 + x(1 − s), in place
        dx = grad * s
        dx *= slope
        return (dx,)


@register
class Relu(Op):
    """y = max(x, 0)."""

    name = "relu"
    formula = {"x": "dx = dy ⊙ [y > 0]  ([y > 0] = [x > 0])"}
    residuals = {"y": "y (the output)"}
    cases = (Case((3, 4), domain="nonzero"),)

    @staticmethod
    def forward(ctx, x):
        # The output tells where x > 0 as well as x does, and the next op (a linear layer) keeps
        # it anyway: saving y instead of x leaves one array to fingerprint for in-place edits.
        y = ctx.xp.maximum(x, 0)
        ctx.save(y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """The slope is 1 where x > 0 and 0 elsewhere (y = max(x, 0) > 0 exactly there); at x = 0
        we take 0, as PyTorch does."""
        return (grad * (ctx.saved["y"] > 0) if ctx.needs_grad[0] else None,)


_GELU_C = math.sqrt(2 / math.pi)


@register
class Gelu(Op):
    """y = ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³): GELU in its tanh form."""

    name = "gelu"
    formula = {"x": "dx = dy ⊙ (h + x · 2h(1 − h) · √(2/π)(1 + 3·0.044715x²)),  h = ½(1 + tanh u)"}
    residuals = {"x": "x (the input)", "h": "h = ½(1 + tanh u)"}
    cases = _UNARY_CASES

    @staticmethod
    def forward(ctx, x):
        # Each step runs in place on one fresh array, so the op allocates h and y and nothing else,
        # and the cube is factored into products (NumPy's x ** 3 calls pow, about 20 times slower).
        xp = ctx.xp
        h = xp.multiply(x, x, out=xp.empty_like(x))     # an array also for 0-d x (x * x is a scalar)
        h *= 0.044715
        h += 1
        h *= x
        h *= _GELU_C                                    # u = √(2/π)·x·(1 + 0.044715x²)
        xp.tanh(h, out=h)
        h += 1
        h *= 0.5                                        # h = ½(1 + tanh u)
        ctx.save(x=x, h=h)
        return xp.multiply(x, h, out=xp.empty_like(h))  # y = x · h

    @staticmethod
    def backward(ctx, grad):
        """y = x·h with h = ½(1 + tanh u), so dy/dx = h + x · dh/du · du/dx, where
        dh/du = ½(1 − tanh² u) = 2h(1 − h) and du/dx = √(2/π)(1 + 3·0.044715x²)."""
        if not ctx.needs_grad[0]:
            return (None,)
        xp = ctx.xp
        x, h = ctx.saved["x"], ctx.saved["h"]
        slope = xp.multiply(x, x, out=xp.empty_like(x))  # in place from here
        slope *= 3 * 0.044715
        slope += 1
        slope *= 2 * _GELU_C                        # 2 · du/dx
        slope *= x
        slope *= h
        slope *= 1 - h                              # x · 2h(1 − h) · du/dx
        slope += h
        slope *= grad
        return (slope,)
