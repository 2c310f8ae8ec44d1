"""Rotary position embedding (RoPE, Su et al. 2021) in the half-split ("rotate_half") convention.

Feature i of a vector is paired with feature i + D/2, and each pair is rotated in its plane by the
angle θ = p · base^(−2i/D), p the token's position. A rotation keeps lengths, and rotating q by
θ_m and k by θ_n leaves q·k depending on m − n only. Backward is the inverse rotation, R(−θ).
"""

from __future__ import annotations

import numpy as np

from .base import Case, Op
from .registry import register

__all__ = ["Rope", "rope_angles", "rotate"]


def rope_angles(xp, positions, dim: int, base: float, dtype):
    """θ (T, D/2): θ[t, i] = positions[t] · base^(−2i/D), in `dtype`."""
    frequencies = base ** (-xp.arange(0, dim // 2, dtype=np.float64) * 2 / dim)   # (D/2,)
    return (positions.astype(np.float64)[:, None] * frequencies[None, :]).astype(dtype)


def rotate(xp, x, cos, sin):
    """[x₁ cos − x₂ sin, x₂ cos + x₁ sin] with x₁, x₂ the two halves of the last axis.

    Computed on whole rows, as x ⊙ [cos, cos] + [x₂, x₁] ⊙ [−sin, sin] (the same floats: adding
    −(x₂ sin) is subtracting x₂ sin): two products over rows of D instead of four over half-rows,
    which NumPy walks in short inner loops.
    """
    half = x.shape[-1] // 2
    swapped = xp.concatenate([x[..., half:], x[..., :half]], axis=-1)     # [x₂, x₁]
    swapped *= xp.concatenate([-sin, sin], axis=-1)
    y = x * xp.concatenate([cos, cos], axis=-1)
    y += swapped
    return y


@register
class Rope(Op):
    """y = R(θ) x pair by pair, with j = i + D/2:
    (y_i, y_j) = (x_i cos θ_i − x_j sin θ_i, x_j cos θ_i + x_i sin θ_i)."""

    name = "rope"
    formula = {"x": "dx = R(−θ)·dy: (dy_i cos θ_i + dy_{i+D/2} sin θ_i, dy_{i+D/2} cos θ_i − dy_i sin θ_i)",
               "positions": None}
    residuals = {"theta": "θ (T, D/2): the angle of each row and pair",
                 "y": "y = R(θ) x (the output, shown by the stepper)"}
    # Positions from 0; from 3 (a cached suffix); not in order, one repeated; batch and head axes;
    # D = 2 (one pair).
    cases = (Case((5, 4), np.arange(5), params={"base": 10000.0}),
             Case((2, 3, 6), np.arange(3, 6), params={"base": 10000.0}),
             Case((4, 8), np.array([7, 2, 2, 11]), params={"base": 100.0}),
             Case((2, 2, 3, 2), np.arange(10, 13), params={"base": 10.0}))

    insides = (("x", "x: the rows before rotation (the op's input; = R(−θ) y)"),
               ("θ", "θ[t, i] = position_t · base^(−2i/D): the angle of pair (i, i + D/2) in row t"),
               ("y", "y = R(θ) x: the rotated rows (what attention reads)"),
               ("dx", "dx = R(−θ) dy: the gradient rotated back"))

    @staticmethod
    def forward(ctx, x, positions, *, base):
        xp = ctx.xp
        theta = rope_angles(xp, positions, x.shape[-1], base, x.dtype)    # (T, D/2)
        y = rotate(xp, x, xp.cos(theta), xp.sin(theta))
        ctx.save(theta=theta, y=y)                # y costs nothing: the graph holds the output anyway
        return y

    @staticmethod
    def backward(ctx, grad):
        """y = R(θ) x with R orthogonal, so dx = R(θ)ᵀ dy = R(−θ) dy: the same rotation with sin negated."""
        if not ctx.needs_grad[0]:
            return None, None
        xp, theta = ctx.xp, ctx.saved["theta"]
        cos, sin = xp.cos(theta), xp.sin(theta)                            # (T, D/2), cheap
        grad_x = rotate(xp, grad, cos, -sin)
        if ctx.trace is not None:              # x is not saved: rotating y back gives it
            ctx.trace.update({"x": rotate(xp, ctx.saved["y"], cos, -sin), "θ": theta, "y": ctx.saved["y"],
                              "dx": grad_x})
        return grad_x, None
