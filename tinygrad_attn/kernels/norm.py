"""Layer norm and RMS norm with fewer passes over memory: the row statistics as products with a
vector of ones (``rowsum``), layer norm's arrays of x's shape made twice instead of once per
arithmetic step, and its dx built in one buffer. The sums are BLAS's, in another order: a few ulps
from the textbook op."""

from __future__ import annotations

import math

from ..ops.norm import LayerNorm, RMSNorm
from .reductions import rowsum
from .registry import kernel

__all__ = ["FusedLayerNorm", "FastRMSNorm"]


@kernel("cpu", "cuda", ulps=64)
class FusedLayerNorm(LayerNorm):
    """Layer norm in two fresh arrays of x's shape (x − μ, which becomes x̂ in place; its square,
    whose buffer then holds y), and dx in one."""

    @staticmethod
    def forward(ctx, x, weight, bias, *, eps):
        xp = ctx.xp
        ctx.inv_n = 1 / x.shape[-1] if x.shape[-1] else math.nan     # a mean of nothing is NaN
        n = x.shape[-1] or math.nan         # divided by n, not times 1/n: a constant row gives x̂ = 0
        x_hat = x - rowsum(xp, x) / n
        y = xp.multiply(x_hat, x_hat, out=xp.empty_like(x_hat))
        rstd = 1 / xp.sqrt(rowsum(xp, y) / n + eps)
        x_hat *= rstd
        ctx.save(x_hat=x_hat, rstd=rstd, weight=weight)
        if any(p is not None and p.dtype != x_hat.dtype for p in (weight, bias)):
            y = x_hat if weight is None else x_hat * weight        # NumPy's dtype promotion
            return y if bias is None else y + bias
        if weight is None and bias is None:
            return x_hat
        if weight is None:
            return xp.add(x_hat, bias, out=y)
        xp.multiply(x_hat, weight, out=y)
        if bias is not None:
            y += bias
        return y

    @staticmethod
    def backward(ctx, grad):
        """The textbook formula with both means made as products with w: Σⱼ ĝ = dy·w and
        Σⱼ ĝ ⊙ x̂ = (dy ⊙ x̂)·w, where dy ⊙ x̂ is dw's summand, made once for both."""
        xp = ctx.xp
        x_hat, rstd, weight = ctx.saved["x_hat"], ctx.saved["rstd"], ctx.saved["weight"]
        dy_x_hat = grad * x_hat if ctx.needs_grad[0] or ctx.needs_grad[1] else None
        grad_x = None
        if ctx.needs_grad[0]:
            if weight is None:
                g_hat, g_sum, slope_sum = grad, rowsum(xp, grad), rowsum(xp, dy_x_hat)
            else:
                g_hat = grad * weight
                g_sum, slope_sum = (grad @ weight)[..., None], (dy_x_hat @ weight)[..., None]
            grad_x = xp.multiply(x_hat, slope_sum * ctx.inv_n, out=xp.empty_like(x_hat))
            xp.subtract(g_hat, grad_x, out=grad_x)      # ĝ − x̂·mean(ĝ ⊙ x̂), in place from here
            grad_x -= g_sum * ctx.inv_n
            grad_x *= rstd
        return (grad_x,
                dy_x_hat if ctx.needs_grad[1] else None,
                grad if ctx.needs_grad[2] else None)


@kernel("cpu", "cuda", ulps=64)
class FastRMSNorm(RMSNorm):
    """RMS norm with mean(x²) and mean(ĝ ⊙ x̂) as products with a vector of ones."""

    @staticmethod
    def forward(ctx, x, weight, *, eps):
        xp = ctx.xp
        ctx.inv_n = 1 / x.shape[-1] if x.shape[-1] else math.nan     # a mean of nothing is NaN
        rstd = 1 / xp.sqrt(rowsum(xp, x * x) * ctx.inv_n + eps)
        x_hat = x * rstd
        ctx.save(x_hat=x_hat, rstd=rstd, weight=weight)
        return x_hat if weight is None else x_hat * weight

    @staticmethod
    def backward(ctx, grad):
        """The textbook formula, the row mean as a product."""
        xp = ctx.xp
        x_hat, rstd, weight = ctx.saved["x_hat"], ctx.saved["rstd"], ctx.saved["weight"]
        grad_x = None
        if ctx.needs_grad[0]:
            g_hat = grad if weight is None else grad * weight
            grad_x = g_hat - x_hat * (rowsum(xp, g_hat * x_hat) * ctx.inv_n)
            grad_x *= rstd
        return grad_x, grad * x_hat if ctx.needs_grad[1] else None
