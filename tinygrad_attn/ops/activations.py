"""Activation functions: sigmoid, silu, relu, gelu, leaky_relu, elu (selu and celu are elu with
PyTorch's parameters), softplus, softsign, logsigmoid, hardtanh (relu6 is hardtanh(0, 6)),
hardsigmoid, hardswish, mish.

Every one is computed without overflow for large |x| (no e^x of a large positive x).
"""

from __future__ import annotations

import math

from .base import UNARY_CASES, Case, Op
from .elementwise_math import erf
from .registry import register

__all__ = ["GELU_FORMS", "Elu", "Gelu", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyRelu", "LogSigmoid",
           "Mish", "Relu", "Sigmoid", "Silu", "Softplus", "Softsign"]


@register
class Sigmoid(Op):
    """y = σ(x) = 1 / (1 + e⁻ˣ), computed without overflow for large |x|."""

    name = "sigmoid"
    formula = {"x": "dx = dy ⊙ y ⊙ (1 − y)"}
    residuals = {"y": "y (the output)"}
    cases = UNARY_CASES

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
    cases = UNARY_CASES

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
        # it anyway: saving y instead of x leaves one array for the in-place guard.
        y = ctx.xp.maximum(x, 0)
        ctx.save(y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """The slope is 1 where x > 0 and 0 elsewhere (y = max(x, 0) > 0 exactly there); at x = 0
        we take 0, as PyTorch does."""
        return (grad * (ctx.saved["y"] > 0) if ctx.needs_grad[0] else None,)


_GELU_C = math.sqrt(2 / math.pi)
_INV_SQRT2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
GELU_FORMS = ("none", "tanh")


@register
class Gelu(Op):
    """y = x·Φ(x), Φ the standard normal's CDF: Φ(x) = ½(1 + erf(x/√2)) (approximate="none", PyTorch's
    default), or Φ(x) ≈ h = ½(1 + tanh u), u = √(2/π)(x + 0.044715x³) (approximate="tanh", GPT-2's)."""

    name = "gelu"
    formula = {"x": "none: dx = dy ⊙ (Φ(x) + x·φ(x)), φ(x) = e^(−x²/2)/√(2π);  "
                    "tanh: dx = dy ⊙ (h + x · 2h(1 − h) · √(2/π)(1 + 3·0.044715x²)),  h = ½(1 + tanh u)"}
    residuals = {"x": "x (the input)", "h": "h = Φ(x) (none) or ½(1 + tanh u) (tanh)"}
    cases = tuple(Case(*case.specs, params={"approximate": form})
                  for form in GELU_FORMS for case in UNARY_CASES)

    half_in_single = True       # erf's series overflows float16; PyTorch computes it in float32

    @staticmethod
    def forward(ctx, x, *, approximate):
        xp = ctx.xp
        if approximate == "none":
            h = erf(xp, x * _INV_SQRT2)
            h += 1
            h *= 0.5                                    # h = Φ(x) = ½(1 + erf(x/√2))
        else:
            # Each step runs in place on one fresh array, so the op allocates h and y and nothing
            # else, and the cube is factored into products (NumPy's x ** 3 calls pow, about 20
            # times slower).
            h = xp.multiply(x, x, out=xp.empty_like(x))     # an array also for 0-d x
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
        """y = x·h, so dy/dx = h + x · dh/dx (product rule).

        none: h = Φ(x), and dΦ/dx is the normal density φ(x) = e^(−x²/2)/√(2π).
        tanh: h = ½(1 + tanh u), dh/du = ½(1 − tanh² u) = 2h(1 − h) and du/dx = √(2/π)(1 + 3·0.044715x²).
        """
        if not ctx.needs_grad[0]:
            return (None,)
        xp = ctx.xp
        x, h = ctx.saved["x"], ctx.saved["h"]
        slope = xp.multiply(x, x, out=xp.empty_like(x))  # in place from here
        if ctx.approximate == "none":
            slope *= -0.5
            xp.exp(slope, out=slope)
            slope *= _INV_SQRT_2PI                      # φ(x)
            slope *= x
        else:
            slope *= 3 * 0.044715
            slope += 1
            slope *= 2 * _GELU_C                        # 2 · du/dx
            slope *= x
            slope *= h
            slope *= 1 - h                              # x · 2h(1 − h) · du/dx
        slope += h
        slope *= grad
        return (slope,)


_CASES = (Case((3, 4), domain="nonzero"), Case((2, 3, 5), domain="nonzero"))


def _softplus(xp, x):
    """log(1 + eˣ) = max(x, 0) + log(1 + e^(−|x|)): never overflows."""
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


def _sigmoid(xp, x):
    """σ(x) = ½(1 + tanh(x/2)), which never overflows."""
    return 0.5 * (1 + xp.tanh(0.5 * x))


@register
class LeakyRelu(Op):
    """y = x for x > 0, negative_slope · x otherwise."""

    name = "leaky_relu"
    formula = {"x": "dx = dy ⊙ (1 if x > 0 else negative_slope)"}
    residuals = {"positive": "where x > 0"}
    cases = (Case((3, 4), params={"negative_slope": 0.01}, domain="nonzero"),
             Case((2, 5), params={"negative_slope": 0.3}, domain="nonzero"))

    @staticmethod
    def forward(ctx, x, *, negative_slope):
        positive = x > 0
        ctx.save(positive=positive)
        return ctx.xp.where(positive, x, x * negative_slope)

    @staticmethod
    def backward(ctx, grad):
        """Two linear pieces: slope 1 for x > 0, negative_slope otherwise (at 0 too, as PyTorch)."""
        if not ctx.needs_grad[0]:
            return (None,)
        return (ctx.xp.where(ctx.saved["positive"], grad, grad * ctx.negative_slope),)


@register
class Elu(Op):
    """y = scale · x for x > 0, scale · alpha · (e^(input_scale · x) − 1) otherwise.

    ELU has scale = input_scale = 1; SELU and CELU are this op with PyTorch's parameters.
    """

    name = "elu"
    formula = {"x": "dx = dy ⊙ (scale if x > 0 else input_scale · (y + scale · alpha))"}
    residuals = {"positive": "where x > 0", "y": "y (the output)"}
    cases = (Case((3, 4), params={"alpha": 1.0, "scale": 1.0, "input_scale": 1.0}, domain="nonzero"),
             Case((3, 4), params={"alpha": 1.6732632423543772, "scale": 1.0507009873554805,
                                  "input_scale": 1.0}, domain="nonzero"),
             Case((2, 5), params={"alpha": 0.5, "scale": 1.0, "input_scale": 2.0}, domain="nonzero"))

    @staticmethod
    def forward(ctx, x, *, alpha, scale, input_scale):
        xp = ctx.xp
        positive = x > 0
        # expm1 of min(x, 0): e^x of a large positive x is never computed, and near 0 expm1 keeps
        # the digits that e^x − 1 would cancel.
        y = xp.where(positive, x * scale, scale * alpha * xp.expm1(xp.minimum(x, 0) * input_scale))
        ctx.save(positive=positive, y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """For x ≤ 0, dy/dx = scale·alpha·input_scale·e^(input_scale·x) = input_scale·(y + scale·alpha)
        (the output reused); for x > 0 it is scale."""
        if not ctx.needs_grad[0]:
            return (None,)
        slope = ctx.input_scale * (ctx.saved["y"] + ctx.scale * ctx.alpha)
        return (ctx.xp.where(ctx.saved["positive"], grad * ctx.scale, grad * slope),)


@register
class Softplus(Op):
    """y = log(1 + e^(beta·x)) / beta, and y = x where beta·x > threshold (as PyTorch)."""

    name = "softplus"
    formula = {"x": "dx = dy ⊙ σ(beta·x)  (dy where beta·x > threshold)"}
    residuals = {"x": "x (the input)"}
    cases = (Case((3, 4), params={"beta": 1.0, "threshold": 20.0}),
             Case((2, 5), params={"beta": 2.0, "threshold": 1.0}, domain="nonzero"))

    @staticmethod
    def forward(ctx, x, *, beta, threshold):
        ctx.save(x=x)
        bx = x * beta
        return ctx.xp.where(bx > threshold, x, _softplus(ctx.xp, bx) / beta)

    @staticmethod
    def backward(ctx, grad):
        """d/dx log(1 + e^(βx))/β = e^(βx)/(1 + e^(βx)) = σ(βx); 1 on the linear part."""
        if not ctx.needs_grad[0]:
            return (None,)
        bx = ctx.saved["x"] * ctx.beta
        return (ctx.xp.where(bx > ctx.threshold, grad, grad * _sigmoid(ctx.xp, bx)),)


@register
class Softsign(Op):
    """y = x / (1 + |x|)."""

    name = "softsign"
    formula = {"x": "dx = dy / (1 + |x|)²"}
    residuals = {"x": "x (the input)"}
    cases = _CASES

    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return x / (1 + ctx.xp.abs(x))

    @staticmethod
    def backward(ctx, grad):
        """Quotient rule on each side of 0: ((1 + |x|) − x·sign x)/(1 + |x|)² = 1/(1 + |x|)²."""
        if not ctx.needs_grad[0]:
            return (None,)
        d = 1 + ctx.xp.abs(ctx.saved["x"])
        return (grad / (d * d),)


@register
class LogSigmoid(Op):
    """y = log σ(x) = −softplus(−x), computed without overflow."""

    name = "logsigmoid"
    formula = {"x": "dx = dy ⊙ σ(−x)"}
    residuals = {"x": "x (the input)"}
    cases = (Case((3, 4)), Case((2, 3, 5)))

    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return -_softplus(ctx.xp, -x)

    @staticmethod
    def backward(ctx, grad):
        """d log σ(x)/dx = σ'(x)/σ(x) = 1 − σ(x) = σ(−x)."""
        return (grad * _sigmoid(ctx.xp, -ctx.saved["x"]) if ctx.needs_grad[0] else None,)


@register
class Hardtanh(Op):
    """y = x clipped to [min_val, max_val] (relu6 is hardtanh with 0 and 6)."""

    name = "hardtanh"
    formula = {"x": "dx = dy ⊙ [min_val < x < max_val]"}
    residuals = {"inside": "where min_val < x < max_val"}
    cases = (Case((3, 4), params={"min_val": -1.0, "max_val": 1.0}),
             Case((3, 4), params={"min_val": 0.0, "max_val": 0.5}))

    @staticmethod
    def forward(ctx, x, *, min_val, max_val):
        ctx.save(inside=(x > min_val) & (x < max_val))
        return ctx.xp.clip(x, min_val, max_val)

    @staticmethod
    def backward(ctx, grad):
        """Slope 1 strictly inside the bounds, 0 on the flat parts (and at the bounds, as PyTorch)."""
        return (grad * ctx.saved["inside"] if ctx.needs_grad[0] else None,)


@register
class Hardsigmoid(Op):
    """y = clip(x/6 + ½, 0, 1): a piecewise-linear sigmoid."""

    name = "hardsigmoid"
    formula = {"x": "dx = dy / 6 ⊙ [−3 < x < 3]"}
    residuals = {"inside": "where −3 < x < 3"}
    cases = (Case((3, 4)), Case((4, 5), domain="positive"))

    @staticmethod
    def forward(ctx, x):
        ctx.save(inside=(x > -3) & (x < 3))
        return ctx.xp.clip(x / 6 + 0.5, 0, 1)

    @staticmethod
    def backward(ctx, grad):
        """Slope 1/6 on the ramp −3 < x < 3, 0 on the flat parts."""
        return (grad * ctx.saved["inside"] / 6 if ctx.needs_grad[0] else None,)


@register
class Hardswish(Op):
    """y = x · hardsigmoid(x) = x · clip(x + 3, 0, 6) / 6."""

    name = "hardswish"
    formula = {"x": "dx = dy ⊙ (0 if x ≤ −3, (2x + 3)/6 if −3 < x < 3, 1 if x ≥ 3)"}
    residuals = {"x": "x (the input)"}
    cases = (Case((3, 4)), Case((4, 5), domain="positive"))

    @staticmethod
    def forward(ctx, x):
        ctx.save(x=x)
        return x * ctx.xp.clip(x + 3, 0, 6) / 6

    @staticmethod
    def backward(ctx, grad):
        """On the ramp y = x(x + 3)/6 has slope (2x + 3)/6; it is 0 below −3 and x (slope 1) above 3.
        At the kinks PyTorch takes the outer piece's slope: 0 at x = −3 and 1 at x = 3."""
        if not ctx.needs_grad[0]:
            return (None,)
        xp, x = ctx.xp, ctx.saved["x"]
        slope = xp.where(x <= -3, 0.0, xp.where(x >= 3, 1.0, (2 * x + 3) / 6))
        return (grad * slope,)


@register
class Mish(Op):
    """y = x · tanh(softplus(x))."""

    name = "mish"
    formula = {"x": "dx = dy ⊙ (t + x σ(x)(1 − t²)),  t = tanh(softplus(x))"}
    residuals = {"x": "x (the input)", "t": "t = tanh(softplus(x))"}
    cases = (Case((3, 4)), Case((2, 3, 5)))

    @staticmethod
    def forward(ctx, x):
        t = ctx.xp.tanh(_softplus(ctx.xp, x))
        ctx.save(x=x, t=t)
        return x * t

    @staticmethod
    def backward(ctx, grad):
        """Product rule: dy/dx = t + x·(1 − t²)·softplus'(x), and softplus'(x) = σ(x)."""
        if not ctx.needs_grad[0]:
            return (None,)
        x, t = ctx.saved["x"], ctx.saved["t"]
        return (grad * (t + x * _sigmoid(ctx.xp, x) * (1 - t * t)),)
