"""A linear layer whose bias gradient Σ over the rows of dy is a product with a vector of ones
(``reductions.colsum``): BLAS sums the columns of a tall matrix faster than NumPy's reduction.
The sum runs in another order: a few ulps from the textbook op."""

from __future__ import annotations

from ..ops.matmul import Linear, rows_of, shared_matrix_backward
from .reductions import colsum
from .registry import kernel

__all__ = ["BlasBiasLinear"]


@kernel("cpu", "cuda", ulps=16)
class BlasBiasLinear(Linear):
    """Linear with db = 1ᵀ G."""

    @staticmethod
    def backward(ctx, grad):
        """dx = G Wᵀ, dW = Xᵀ G as the textbook op; db = 1ᵀ G."""
        grad_x, grad_w = shared_matrix_backward(ctx, ctx.saved.get("x"), ctx.saved.get("w"), grad)
        return grad_x, grad_w, colsum(ctx.xp, rows_of(grad)) if ctx.needs_grad[2] else None
