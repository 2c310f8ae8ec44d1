"""Matrix products: ``matmul`` with ``numpy.matmul`` semantics (batched, broadcast batch dims, 1-D
operands), and ``linear``, a layer's x W + b as one op."""

from __future__ import annotations

import math

from .base import Case, Op
from .registry import register

__all__ = ["Linear", "MatMul", "rows_of", "shared_matrix_backward"]


@register
class MatMul(Op):
    """C = A @ B."""

    name = "matmul"
    formula = {"a": "dA = dC @ Bᵀ", "b": "dB = Aᵀ @ dC"}
    residuals = {"a": "A", "b": "B"}
    cases = (Case((3, 4), (4, 5)), Case((2, 1, 3, 4), (5, 4, 2)), Case((4,), (4, 3)),
             Case((2, 3, 4), (4,)), Case((4,), (4,)), Case((2, 3, 4), (4, 5)))

    @staticmethod
    def forward(ctx, a, b):
        ctx.save(a=a, b=b)
        if a.ndim > 2 and b.ndim == 2:      # (..., n, k) @ (k, m): one GEMM over all the rows
            _note_layout(ctx, b)
            return _shared_matrix_product(a, b)
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
        if a.ndim > 2 and b.ndim == 2:      # a linear layer: the batch sum of dB is one GEMM
            return shared_matrix_backward(ctx, a, b, grad)
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


@register
class Linear(Op):
    """y = x W + b over the last axis of x: a linear layer as one op (b may be None).

    All the rows of x (every leading axis) go through one GEMM and b is added in place, so a
    layer makes one (..., out) array and one node instead of two of each (matmul, then add).
    """

    name = "linear"
    formula = {
        "x": "dx = dy Wᵀ",
        "weight": "dW = xᵀ dy  (x and dy as matrices of their rows)",
        "bias": "db = Σ dy over the rows",
    }
    residuals = {"x": "x (the input)", "w": "W (the weight matrix)"}
    cases = (Case((3, 4), (4, 5), (5,)), Case((2, 3, 4), (4, 2), (2,)), Case((2, 3, 4), (4, 5), None),
             Case((4,), (4, 3), (3,)))

    @staticmethod
    def forward(ctx, x, weight, bias):
        # Backward reads x only for dW and W only for dx, so each is kept (and fingerprinted for
        # in-place edits, a read of the whole array) only when that gradient is asked for: a first
        # layer, whose input needs no gradient, keeps x and not W.
        if ctx.needs_grad[1]:
            ctx.save(x=x)
        if ctx.needs_grad[0]:
            ctx.save(w=weight)
        _note_layout(ctx, weight)
        y = _shared_matrix_product(x, weight)
        if bias is None:
            return y
        if bias.dtype != y.dtype:               # NumPy's dtype promotion, as x @ W + b
            return y + bias
        y += bias
        return y

    @staticmethod
    def backward(ctx, grad):
        """With X (r, in) and G (r, out) the rows of x and dy: dx = G Wᵀ, dW = Xᵀ G (the sum of
        every row's outer product in one GEMM), db = Σ over the rows of G."""
        grad_x, grad_w = shared_matrix_backward(ctx, ctx.saved.get("x"), ctx.saved.get("w"), grad)
        return grad_x, grad_w, rows_of(grad).sum(axis=0) if ctx.needs_grad[2] else None


def _shared_matrix_product(a, b):
    """(..., n, k) @ (k, m) as one GEMM over all the rows of a, shaped back to (..., n, m)."""
    if a.ndim == 2:                         # already the matrix of its rows
        return a @ b
    return (rows_of(a) @ b).reshape(a.shape[:-1] + b.shape[-1:])


def shared_matrix_backward(ctx, a, b, grad):
    """(..., n, k) @ (k, m) as rows: with A₂ (r, k) and G₂ (r, m) the operands' rows stacked,
    dA = G·Bᵀ and dB = A₂ᵀ·G₂, which is Σ over the batch of Aᵢᵀ·Gᵢ in one GEMM (no batched
    product left for the engine to sum). `a` is read only for dB and `b` only for dA; forward
    noted B's layout in ``ctx.b_transposed`` (see ``_note_layout``)."""
    grad2 = rows_of(grad)                     # (r, m)
    grad_a = None
    if ctx.needs_grad[0]:
        grad_a = grad2 @ b.T if grad.ndim == 2 else (grad2 @ b.T).reshape(grad.shape[:-1] + b.shape[:1])
    grad_b = None
    if ctx.needs_grad[1]:
        if ctx.b_transposed:
            # A transposed weight (a tied LM head's Eᵀ, E (V, D)): dB made as (G₂ᵀ·A₂)ᵀ, in B's
            # own layout, so that the transpose back to E is C-ordered and adds to the embedding's
            # gradient row by row. As A₂ᵀ·G₂ it comes out Fortran-ordered, and that sum with a
            # C-ordered array reads one of them across rows, a large part of SmolLM-135M's step
            # (V = 49152).
            grad_b = (grad2.T @ rows_of(a)).T
        else:
            grad_b = rows_of(a).T @ grad2
    return grad_a, grad_b


def _note_layout(ctx, b) -> None:
    """Note in ctx whether B is a transposed matrix (Fortran-ordered only), the layout
    ``_shared_matrix_backward`` makes dB in: a flag, so that backward needs no B for dB."""
    ctx.b_transposed = b.ndim == 2 and b.flags.f_contiguous and not b.flags.c_contiguous


def rows_of(x):
    """x (..., k) as a matrix (r, k) of its rows (an explicit r, so that k = 0 works too); a
    matrix as it is (a reshape costs a few tenths of a µs, as much as a small op's bookkeeping)."""
    if x.ndim == 2:
        return x
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
