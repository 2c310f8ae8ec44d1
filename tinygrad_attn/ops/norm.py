"""Layer normalisation over the last axis, as one op with a fused backward."""

from __future__ import annotations

from . import register
from .base import Case, Op


@register
class LayerNorm(Op):
    """y = x̂ ⊙ w + b with x̂ = (x − μ) · rstd, rstd = 1/√(σ² + eps), μ and σ² over the last axis."""

    name = "layer_norm"
    formula = ("dx = rstd ⊙ (ĝ − mean(ĝ) − x̂ ⊙ mean(ĝ ⊙ x̂)),  ĝ = dy ⊙ w",
               "dw = Σ dy ⊙ x̂", "db = Σ dy")
    cases = (Case((3, 5), (5,), (5,), params={"eps": 1e-5}),
             Case((2, 3, 4), None, None, params={"eps": 1e-5}),
             Case((2, 4), (4,), None, params={"eps": 0.1}),
             Case((3, 1, 4), None, (4,), params={"eps": 1e-5}))

    @staticmethod
    def forward(ctx, x, weight, bias, *, eps):
        mean = x.mean(axis=-1, keepdims=True)
        centered = x - mean
        rstd = 1 / ctx.xp.sqrt((centered * centered).mean(axis=-1, keepdims=True) + eps)
        x_hat = centered * rstd
        ctx.save(x_hat=x_hat, rstd=rstd, weight=weight)
        y = x_hat if weight is None else x_hat * weight
        return y if bias is None else y + bias

    @staticmethod
    def backward(ctx, grad):
        """With ĝ = dy ⊙ w and n features: dx = rstd·(ĝ − mean ĝ − x̂·mean(ĝ ⊙ x̂)); the two means
        are the paths through μ and σ². dw, db are summed over every leading axis by the engine."""
        x_hat, rstd, weight = ctx.saved["x_hat"], ctx.saved["rstd"], ctx.saved["weight"]
        grad_x = None
        if ctx.needs_grad[0]:
            g_hat = grad if weight is None else grad * weight
            grad_x = rstd * (g_hat - g_hat.mean(axis=-1, keepdims=True)
                             - x_hat * (g_hat * x_hat).mean(axis=-1, keepdims=True))
        return (grad_x,
                grad * x_hat if ctx.needs_grad[1] else None,
                grad if ctx.needs_grad[2] else None)
