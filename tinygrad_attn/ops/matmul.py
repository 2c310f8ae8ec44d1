"""Matrix product with ``numpy.matmul`` semantics: batched, broadcast batch dims, 1-D operands."""

from __future__ import annotations

from . import register
from .base import Case, Op


@register
class MatMul(Op):
    """C = A @ B."""

    name = "matmul"
    formula = ("dA = dC @ Bᵀ", "dB = Aᵀ @ dC")
    cases = (Case((3, 4), (4, 5)), Case((2, 1, 3, 4), (5, 4, 2)), Case((4,), (4, 3)),
             Case((2, 3, 4), (4,)), Case((4,), (4,)))

    @staticmethod
    def forward(ctx, a, b):
        ctx.save(a=a, b=b)
        return a @ b

    @staticmethod
    def backward(ctx, grad):
        """dA = G·Bᵀ, dB = Aᵀ·G on the last two axes.

        A 1-D A is a row (1, k) and a 1-D B a column (k, 1), as in matmul's forward; G gets
        the axis they dropped back, and the results lose it again. Batch broadcasting is undone
        by the engine, which sums over the batch axes an operand lacked.
        """
        xp = ctx.xp
        a, b = ctx.saved["a"], ctx.saved["b"]
        a2 = a[None, :] if a.ndim == 1 else a                    # (..., n, k)
        b2 = b[:, None] if b.ndim == 1 else b                    # (..., k, m)
        batch = grad.shape[:grad.ndim - 2 + (a.ndim == 1) + (b.ndim == 1)]
        grad = grad.reshape(batch + (a2.shape[-2], b2.shape[-1]))  # (..., n, m)
        grad_a = grad_b = None
        if ctx.needs_grad[0]:
            grad_a = grad @ xp.swapaxes(b2, -1, -2)              # (..., n, k)
            if a.ndim == 1:
                grad_a = grad_a[..., 0, :]
        if ctx.needs_grad[1]:
            grad_b = xp.swapaxes(a2, -1, -2) @ grad              # (..., k, m)
            if b.ndim == 1:
                grad_b = grad_b[..., 0]
        return grad_a, grad_b
