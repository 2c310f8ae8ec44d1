"""Reference solution to exercise 1: softmax's backward.

Forward is written for you: y = softmax(x) along the last axis. Write `backward`: given
grad = dL/dy (same shape as y), return (dL/dx,): backward always returns a tuple with one
gradient per input, here a 1-tuple. Work on NumPy arrays; `ctx.saved["y"]` holds y.
Hint: docs/softmax.md, "The Jacobian and its vector product" — never build the n × n Jacobian.

Check: python -m tinygrad_attn check exercises/01_softmax_backward.py
"""

import numpy as np

from tinygrad_attn.ops.base import Op


class Softmax(Op):
    """y = exp(x − max x) / Σ exp(x − max x) along the last axis."""

    name = "exercise_softmax"

    @staticmethod
    def forward(ctx, x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        y = e / e.sum(axis=-1, keepdims=True)
        ctx.save(y=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        """Return (dx,), the gradient of the loss with respect to x (the shape of x)."""
        y = ctx.saved["y"]
        return (y * (grad - (grad * y).sum(axis=-1, keepdims=True)),)    # dx = y ⊙ (dy − ⟨dy, y⟩)
