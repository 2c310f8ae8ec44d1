"""Inverted dropout with a given keep-mask: the mask is drawn by ``F.dropout``, not here."""

from __future__ import annotations

import numpy as np

from .base import Case, Op
from .registry import register

__all__ = ["Dropout"]


@register
class Dropout(Op):
    """y = x ⊙ keep / (1 − p): kept elements are scaled up so that E[y] = x."""

    name = "dropout"
    formula = {"x": "dx = dy ⊙ keep / (1 − p)", "keep": None}
    residuals = {"keep": "the keep mask"}
    cases = (Case((3, 4), np.array([[True, False, True, True]] * 3), params={"p": 0.25}),
             Case((2, 3, 2), np.arange(12).reshape(2, 3, 2) % 3 > 0, params={"p": 0.5}))

    @staticmethod
    def forward(ctx, x, keep, *, p):
        ctx.save(keep=keep)
        return x * keep * (1 / (1 - p))

    @staticmethod
    def backward(ctx, grad):
        """Each element is x times a constant (0 or 1/(1 − p)), so the gradient is scaled alike."""
        return (grad * ctx.saved["keep"] * (1 / (1 - ctx.p)) if ctx.needs_grad[0] else None, None)
