"""Normalisation over the last axis: layer norm, and RMS norm, which is layer norm without the mean.

Each is one op with its own backward (the paths through the mean and the variance summed by
hand). A float16 input is normalised in float32 (mean and variance accumulated there) and the
result cast back to float16, as PyTorch does (``half_in_single``).
"""

from __future__ import annotations

from .base import Case, Op
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

    half_in_single = True       # mean and variance accumulated in float32 (Σx overflows at 65504)

    @staticmethod
    def forward(ctx, x, weight, bias, *, eps):
        xp = ctx.xp
        centred = x - x.mean(axis=-1, keepdims=True)                # x − μ
        rstd = 1 / xp.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps)   # (..., 1)
        x_hat = centred * rstd
        ctx.save(x_hat=x_hat, rstd=rstd, weight=weight)
        y = x_hat if weight is None else x_hat * weight
        return y if bias is None else y + bias

    @staticmethod
    def backward(ctx, grad):
        """With ĝ = dy ⊙ w: dx = rstd·(ĝ − mean ĝ − x̂·mean(ĝ ⊙ x̂)); the two means are the paths
        through μ and σ². dw = dy ⊙ x̂ and db = dy, summed over every leading axis by the engine."""
        x_hat, rstd, weight = ctx.saved["x_hat"], ctx.saved["rstd"], ctx.saved["weight"]
        grad_x = None
        if ctx.needs_grad[0]:
            g_hat = grad if weight is None else grad * weight
            grad_x = rstd * (g_hat - g_hat.mean(axis=-1, keepdims=True)
                             - x_hat * (g_hat * x_hat).mean(axis=-1, keepdims=True))
        return (grad_x,
                grad * x_hat if ctx.needs_grad[1] else None,
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

    half_in_single = True       # the mean of x² accumulated in float32

    @staticmethod
    def forward(ctx, x, weight, *, eps):
        rstd = 1 / ctx.xp.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)    # (..., 1)
        x_hat = x * rstd
        ctx.save(x_hat=x_hat, rstd=rstd, weight=weight)
        return x_hat if weight is None else x_hat * weight

    @staticmethod
    def backward(ctx, grad):
        """With ĝ = dy ⊙ w: dx = rstd·(ĝ − x̂·mean(ĝ ⊙ x̂)), layer norm's formula without the
        path through the mean; the second term is the path through rstd. dw = Σ dy ⊙ x̂."""
        x_hat, rstd, weight = ctx.saved["x_hat"], ctx.saved["rstd"], ctx.saved["weight"]
        grad_x = None
        if ctx.needs_grad[0]:
            g_hat = grad if weight is None else grad * weight
            grad_x = rstd * (g_hat - x_hat * (g_hat * x_hat).mean(axis=-1, keepdims=True))
        return grad_x, grad * x_hat if ctx.needs_grad[1] else None
