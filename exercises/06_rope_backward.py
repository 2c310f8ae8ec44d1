"""Exercise 6: RoPE's backward.

Forward is written for you: each pair of features (i, i + D/2) of row t is rotated by the angle
θ[t, i] = positions[t] · base^(−2i/D):
    y_i = x_i cos θ − x_{i+D/2} sin θ,    y_{i+D/2} = x_{i+D/2} cos θ + x_i sin θ.
Write `backward`: given grad = dL/dy (shaped like x), return (dx, None); positions take no gradient.
Hint: docs/modern_attention.md — y = R(θ) x with R a rotation, so dx = R(θ)ᵀ dy. What is Rᵀ?

Check: python -m tinygrad_attn check exercises/06_rope_backward.py
"""

import numpy as np

from tinygrad_attn.ops.base import Op


class Rope(Op):
    """y = R(θ) x, pair by pair."""

    name = "exercise_rope"

    @staticmethod
    def forward(ctx, x, positions, *, base):
        half = x.shape[-1] // 2
        theta = positions[:, None] * base ** (-2 * np.arange(half) / x.shape[-1])    # (T, D/2)
        cos, sin = np.cos(theta), np.sin(theta)
        ctx.save(cos=cos, sin=sin)
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    @staticmethod
    def backward(ctx, grad):
        """Return (dx, None)."""
        raise NotImplementedError("return (dx, None) from grad, ctx.saved['cos'] and ctx.saved['sin']")
