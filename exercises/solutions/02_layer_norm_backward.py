"""Reference solution to exercise 2: layer norm's backward.

Forward is written for you: y = x̂ ⊙ w + b with x̂ = (x − μ) · rstd, rstd = 1/√(σ² + eps), μ and
σ² over the last axis. Write `backward`: given grad = dL/dy, return (dx, dw, db). dw and db may
keep x's shape; the engine sums them over the leading axes (or sum them yourself).
Hint: docs/layer_norm.md — x̂ depends on x three ways: directly, through μ and through σ².

Check: python -m tinygrad_attn check exercises/02_layer_norm_backward.py
"""

import numpy as np

from tinygrad_attn.ops.base import Op


class LayerNorm(Op):
    """y = x̂ ⊙ weight + bias over the last axis."""

    name = "exercise_layer_norm"

    @staticmethod
    def forward(ctx, x, weight, bias, *, eps):
        centered = x - x.mean(axis=-1, keepdims=True)
        rstd = 1 / np.sqrt((centered**2).mean(axis=-1, keepdims=True) + eps)
        x_hat = centered * rstd
        ctx.save(x_hat=x_hat, rstd=rstd, weight=weight)
        return x_hat * weight + bias

    @staticmethod
    def backward(ctx, grad):
        """Return (dx, dweight, dbias)."""
        x_hat, rstd, weight = ctx.saved["x_hat"], ctx.saved["rstd"], ctx.saved["weight"]
        g = grad * weight                                               # ĝ = dy ⊙ w
        dx = rstd * (g - g.mean(axis=-1, keepdims=True) - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))
        return dx, grad * x_hat, grad
