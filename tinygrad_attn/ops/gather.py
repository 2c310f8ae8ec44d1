"""Index ops along one axis, as PyTorch's: gather (read x at the indices) and scatter_add (add src
into x at the indices). Each is the other's backward.

An `index` has x's number of axes; along `axis` it holds positions, and on every other axis d it
covers the first index.shape[d] positions. For axis 0 of a 2-D x:
gather: y[i, j] = x[index[i, j], j]; scatter_add: y = x, then y[index[i, j], j] += src[i, j].
The indices reach the ops already checked to lie in [0, x.shape[axis]).
"""

from __future__ import annotations

import numpy as np

from .base import Case, Op
from .registry import register

__all__ = ["Gather", "ScatterAdd", "positions"]


_INDEX = np.array([[0, 2, 2], [1, 0, 3]])       # positions along axis 1 of a (2, 4) or (3, 4) x


def positions(xp, index, axis: int) -> tuple:
    """The full advanced index that `index` along `axis` stands for: on each other axis d an
    arange over index.shape[d], shaped to broadcast against `index`."""
    return tuple(index if d == axis else
                 xp.arange(n).reshape([n if e == d else 1 for e in range(index.ndim)])
                 for d, n in enumerate(index.shape))


@register
class Gather(Op):
    """y = x read at `index` along `axis`: y[i, j] = x[index[i, j], j] for axis 0."""

    name = "gather"
    formula = {"x": "dx = scatter_add(zeros_like(x), axis, index, dy)", "index": None}
    residuals = {"index": "the index"}
    cases = (Case((3, 4), _INDEX, params={"axis": 1}), Case((4, 3), _INDEX.T, params={"axis": 0}),
             Case((2, 4, 2), _INDEX[:, :, None], params={"axis": 1}))

    @staticmethod
    def forward(ctx, x, index, *, axis):
        ctx.in_shape = x.shape
        ctx.save(index=index)
        return x[positions(ctx.xp, index, axis)]

    @staticmethod
    def backward(ctx, grad):
        """Each y element is one x element (slope 1); an x element read twice gets both gradients,
        so they are scatter-added, not written."""
        if not ctx.needs_grad[0]:
            return None, None
        grad_x = ctx.xp.zeros(ctx.in_shape, dtype=grad.dtype)
        ctx.xp.add.at(grad_x, positions(ctx.xp, ctx.saved["index"], ctx.axis), grad)
        return grad_x, None


@register
class ScatterAdd(Op):
    """y = x with src added at `index` along `axis`: y[index[i, j], j] += src[i, j] for axis 0."""

    name = "scatter_add"
    formula = {"x": "dx = dy", "index": None, "src": "dsrc = gather(dy, axis, index) (0 off the index)"}
    residuals = {"index": "the index"}
    cases = (Case((3, 4), _INDEX, (2, 3), params={"axis": 1}),
             Case((4, 3), _INDEX.T, (3, 2), params={"axis": 0}),
             Case((2, 4), _INDEX, (2, 5), params={"axis": 1}))

    @staticmethod
    def forward(ctx, x, index, src, *, axis):
        ctx.src_shape = src.shape
        ctx.save(index=index)
        y = x.copy()
        ctx.xp.add.at(y, positions(ctx.xp, index, axis), src[tuple(slice(0, n) for n in index.shape)])
        return y

    @staticmethod
    def backward(ctx, grad):
        """y is x plus added terms (slope 1 for x); src[i, j] was added to one element of y, so it
        receives that element's gradient, and src elements off the index receive 0."""
        grad_src = None
        if ctx.needs_grad[2]:
            grad_src = ctx.xp.zeros(ctx.src_shape, dtype=grad.dtype)
            picked = grad[positions(ctx.xp, ctx.saved["index"], ctx.axis)]
            grad_src[tuple(slice(0, n) for n in picked.shape)] = picked
        return (grad if ctx.needs_grad[0] else None, None, grad_src)
