"""The backward of x[ids] (an embedding's lookup) on the CPU as sorted segment sums: NumPy's
``add.at``, the textbook scatter-add, goes element by element; sorting the ids makes equal ones
neighbours and ``add.reduceat`` sums each run of rows at once. The same sums, each run added in
the order of its rows, as ``add.at`` adds them."""

from __future__ import annotations

import numpy as np

from ..ops.selection import GetItem
from .registry import kernel

__all__ = ["SortedScatterGetItem"]


@kernel("cpu", ulps=0)
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
