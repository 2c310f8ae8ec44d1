"""The scatter-adds of the selection ops made fast on the CPU and repeatable on the GPU.

On the CPU, the backward of x[ids] (an embedding's lookup) as sorted segment sums: NumPy's
``add.at``, the textbook scatter-add, goes element by element; sorting the ids makes equal ones
neighbours and ``add.reduceat`` sums each run of rows at once. ``reduceat`` adds a run in its own
order (three rows a, b, c as a + (b + c), where ``add.at`` makes (a + b) + c): an id met twice
gets the same bits as the textbook's, one met more often a few ulps apart.

On the GPU, CuPy's ``add.at`` adds with atomics, in an order that changes from run to run; the
backward of getitem and gather, and scatter_add itself, add in the fixed pairwise order of
``scatter.py`` instead: the same bits on every run, a few ulps from the textbook's order.
"""

from __future__ import annotations

import numpy as np

from ..ops.selection import Gather, GetItem, ScatterAdd, positions
from .registry import kernel
from .scatter import scatter_sum

__all__ = ["PairwiseScatterAdd", "PairwiseScatterGather", "PairwiseScatterGetItem", "SortedScatterGetItem"]


@kernel("cpu", ulps=64)
class SortedScatterGetItem(GetItem):
    """getitem whose backward, for one integer-array index (an embedding's ids), sums the rows of
    dy id by id after sorting the ids."""

    @staticmethod
    def backward(ctx, grad):
        """dx = scatter_add(zeros_like(x), ids, dy) as a sum over each run of equal sorted ids."""
        index = ctx.index
        if ctx.needs_grad[0] and len(index) == 1 and getattr(index[0], "dtype", np.dtype("O")).kind in "iu":
            return (_scatter_add_rows(ctx.in_shape, index[0], grad),)
        return GetItem.backward(ctx, grad)


def _scatter_add_rows(shape: tuple[int, ...], rows: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """zeros(shape) with each row of `grad` added at its id in `rows` (x[ids], as in an
    embedding): the ids sorted so that equal ones are neighbours, each run of rows summed with
    ``add.reduceat``."""
    ids = rows.reshape(-1) % shape[0]               # −1 and n − 1 are one row
    grad_rows = grad.reshape((ids.size,) + shape[1:])
    grad_x = np.zeros(shape, dtype=grad.dtype)
    if ids.size == 0:
        return grad_x
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    grad_x[ids[starts]] = np.add.reduceat(grad_rows[order], starts, axis=0)
    return grad_x


@kernel("cuda", ulps=64)
class PairwiseScatterGetItem(GetItem):
    """getitem whose backward adds the gradients that meet at one element of x pairwise, in an
    order fixed by the index (``scatter.scatter_sum``): the same bits on every run."""

    @staticmethod
    def backward(ctx, grad):
        """dx = scatter_add(zeros_like(x), index, dy), each element's sum in a fixed order."""
        if not ctx.needs_grad[0]:
            return (None,)
        return (scatter_sum(ctx.xp, ctx.in_shape, ctx.index, grad),)


@kernel("cuda", ulps=64)
class PairwiseScatterGather(Gather):
    """gather whose backward adds the gradients of an element read twice in a fixed order."""

    @staticmethod
    def backward(ctx, grad):
        """dx = scatter_add(zeros_like(x), axis, index, dy), each element's sum in a fixed order."""
        if not ctx.needs_grad[0]:
            return None, None
        xp = ctx.xp
        return scatter_sum(xp, ctx.in_shape, positions(xp, ctx.saved["index"], ctx.axis), grad), None


@kernel("cuda", ulps=64)
class PairwiseScatterAdd(ScatterAdd):
    """scatter_add whose forward sums the src elements that meet at one element in a fixed order,
    then adds the sum to x: y = x + scatter_sum(src) (the textbook adds them to x one by one)."""

    @staticmethod
    def forward(ctx, x, index, src, *, axis):
        xp = ctx.xp
        ctx.src_shape = src.shape
        ctx.save(index=index)
        added = src[tuple(slice(0, n) for n in index.shape)]
        return x + scatter_sum(xp, x.shape, positions(xp, index, axis), added)
