"""Normalisation over the last axis (layer norm, RMS norm), each one op with a fused backward.

A float16 input is normalised in float32 (mean and variance accumulated there) and the result cast
back to float16, as PyTorch does.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels.reductions import rowsum
from .base import Case, Op, cast_back, single_for_half
from .registry import register

__all__ = ["LayerNorm", "RMSNorm"]


@register
class LayerNorm(Op):
    """y = x̂ ⊙ w + b with x̂ = (x − μ) · rstd, rstd = 1/√(σ² + eps), μ and σ² over the last axis."""

    name = "layer_norm"
    formula = {
        "x": "dx = rstd ⊙ (ĝ − mean(ĝ) − x̂ ⊙ mean(ĝ ⊙ x̂)),  ĝ = dy ⊙ w",
        "weight": "dw = Σ dy ⊙ x̂",
        "bias": "db = Σ dy",
    }
    residuals = {"x_hat": "x̂ (the normalised input)", "rstd": "1/σ per row", "weight": "γ (the weight)"}
    cases = (Case((3, 5), (5,), (5,), params={"eps": 1e-5}),
             Case((2, 3, 4), None, None, params={"eps": 1e-5}),
             Case((2, 4), (4,), None, params={"eps": 0.1}),
             Case((3, 1, 4), None, (4,), params={"eps": 1e-5}))

    @staticmethod
    def forward(ctx, x, weight, bias, *, eps):
        if x.dtype == np.float16:       # statistics in float32 (a float16 Σx overflows at 65504)
            return cast_back(LayerNorm.forward(ctx, *single_for_half(x, weight, bias), eps=eps), x.dtype)
        # Two fresh arrays of x's shape in all (x − μ, which becomes x̂ in place; its square,
        # whose buffer then holds y), instead of one per arithmetic step, and the backward's dx
        # built in one buffer: forward + backward at the train step's shape (2048 × 64, weight and
        # bias) take 70-85 µs (4%) less than the plain formula as RMSNorm writes it (1.7-1.8 ms);
        # at (8, 16) they take 3 µs more (both measured against check_costs' --tricks stand-in).
        xp = ctx.xp
        ctx.inv_n = 1 / x.shape[-1] if x.shape[-1] else math.nan     # a mean of nothing is NaN
        n = x.shape[-1] or math.nan         # divided by n, not times 1/n: a constant row gives x̂ = 0
        x_hat = x - rowsum(xp, x) / n
        y = xp.multiply(x_hat, x_hat, out=xp.empty_like(x_hat))
        variance = rowsum(xp, y) / n
        rstd = 1 / xp.sqrt(variance + eps)
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
        """With ĝ = dy ⊙ w and n features: dx = rstd·(ĝ − mean ĝ − x̂·mean(ĝ ⊙ x̂)); the two means
        are the paths through μ and σ². dw, db are summed over every leading axis by the engine.

        With a weight both means are products with w: Σⱼ ĝ = dy·w and Σⱼ ĝ ⊙ x̂ = (dy ⊙ x̂)·w, and
        dy ⊙ x̂ is dw's summand, made once for both."""
        xp = ctx.xp
        x_hat, rstd, weight = ctx.saved["x_hat"], ctx.saved["rstd"], ctx.saved["weight"]
        dy_x_hat = grad * x_hat if ctx.needs_grad[0] or ctx.needs_grad[1] else None
        grad_x = None
        if ctx.needs_grad[0]:
            # One full pass fewer than making ĝ ⊙ x̂ apart from dw's dy ⊙ x̂: this backward's own
            # time per step (one thread, interleaved with the other form in one process) 1.59 →
            # 1.48 ms in the train row (5 calls at 2048 × 64), 2.29 → 2.16 ms in the text step
            # (9 at 768 × 128).
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


@register
class RMSNorm(Op):
    """y = x̂ ⊙ w with x̂ = x · rstd, rstd = 1/√(mean(x²) + eps) over the last axis: layer norm
    without the mean subtracted and without the bias."""

    name = "rms_norm"
    formula = {
        "x": "dx = rstd ⊙ (ĝ − x̂ ⊙ mean(ĝ ⊙ x̂)),  ĝ = dy ⊙ w",
        "weight": "dw = Σ dy ⊙ x̂",
    }
    residuals = {"x_hat": "x̂ (the normalised input)", "rstd": "1/rms per row", "weight": "γ (the weight)"}
    cases = (Case((3, 5), (5,), params={"eps": 1e-6}),
             Case((2, 3, 4), None, params={"eps": 1e-6}),
             Case((2, 4), (4,), params={"eps": 0.5}))

    @staticmethod
    def forward(ctx, x, weight, *, eps):
        if x.dtype == np.float16:       # statistics in float32, as in LayerNorm
            return cast_back(RMSNorm.forward(ctx, *single_for_half(x, weight), eps=eps), x.dtype)
        xp = ctx.xp
        ctx.inv_n = 1 / x.shape[-1] if x.shape[-1] else math.nan     # a mean of nothing is NaN
        rstd = 1 / xp.sqrt(rowsum(xp, x * x) * ctx.inv_n + eps)
        x_hat = x * rstd
        ctx.save(x_hat=x_hat, rstd=rstd, weight=weight)
        return x_hat if weight is None else x_hat * weight

    @staticmethod
    def backward(ctx, grad):
        """With ĝ = dy ⊙ w: dx = rstd·(ĝ − x̂·mean(ĝ ⊙ x̂)), layer norm's formula without the
        path through the mean; the second term is the path through rstd. dw = Σ dy ⊙ x̂."""
        xp = ctx.xp
        x_hat, rstd, weight = ctx.saved["x_hat"], ctx.saved["rstd"], ctx.saved["weight"]
        grad_x = None
        if ctx.needs_grad[0]:
            g_hat = grad if weight is None else grad * weight
            grad_x = g_hat - x_hat * (rowsum(xp, g_hat * x_hat) * ctx.inv_n)
            grad_x *= rstd
        return grad_x, grad * x_hat if ctx.needs_grad[1] else None
