"""Scatter-add in an order fixed by the data: the same bits on every run, on the GPU too.

The textbook scatter-add, ``add.at(zeros, ids, rows)``, is what every backward of a lookup runs
(getitem, gather, repeat_interleave, the copying pads): an id met twice gets both rows. NumPy
adds them one by one in index order. CuPy adds with atomic operations, so on a GPU the rows of
one id land in whatever order the threads reach memory, which changes from run to run; float
addition is not associative, so two identical backward passes differ in their last bits, and a
training run resumed from a checkpoint on "cuda" does not repeat its losses. Here every sum has
one order, fixed by the ids alone, made of array operations a GPU runs deterministically (a
stable sort, binary searches, gathers, elementwise adds):

1. sort: ``order = argsort(ids, stable)``; the rows of one id become a *run*, in their original
   order (the order ``add.at`` visits them).
2. find the runs: for sorted row j, ``first[j]`` and ``end[j]`` (``searchsorted`` left and right)
   bound its run, and ``place[j] = j − first[j]`` is its place in it.
3. add pairwise, by doubling: for w = 1, 2, 4, … < n,

       s[j] ← s[j] + s[j + w]    where place[j] ≡ 0 (mod 2w) and j + w < end[j]

   After the step of width w, a row whose place is a multiple of 2w holds the sum of the (up to)
   2w rows of its run that start there; after ⌈log₂ n⌉ steps ``s[first]`` is its whole run's sum,
   added as a balanced tree. A step where no row qualifies leaves every row as it was, so the
   number of steps comes from n, a shape, and nothing is read back from the device.
4. write: ``out[ids[j]] = s[first[j]]``; every row of a run writes the same bits, so the order in
   which the writes land does not matter.

Accuracy. For a run of k rows g₁ … g_k, the tree's error is at most ⌈log₂ k⌉ · u · Σ|gᵢ| (u the
unit roundoff), against (k − 1) · u · Σ|gᵢ| for the textbook's left-to-right sum, so the two
differ by at most (k − 1 + ⌈log₂ k⌉) · u · Σ|gᵢ| (to first order in u). Runs of up to three
rows are added in the textbook's own order, (g₁ + g₂) + g₃: the same bits.

Why not a product with a 0/1 matrix (an (ids × rows) matrix of ones where the id matches, times
the rows: each row of the result is an ordered sum, and adding exact zeros changes nothing)? Its
work grows as ids × rows × width, not rows × width × log rows, and 0 · inf is NaN: one row holding
an inf would turn every id of its chunk into NaN, where ``add.at`` sends the inf to one id.

Memory: the sorted rows and, during a step, three more arrays of their size (the partners, their
sums, the rows kept or summed); a few integer arrays of n. Nothing of the output's size but the
output.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["flat_positions", "scatter_sum", "sum_rows_by_id"]


def sum_rows_by_id(xp: Any, ids: Any, rows: Any, size: int) -> Any:
    """out of shape (size, *rows.shape[1:]) with out[i] = Σ rows[j] over the j with ids[j] = i
    (0 where no row has id i), each sum in the fixed pairwise order of the module docstring.

    `ids` is 1-D, one id per row, each in [−size, size) (−1 and size − 1 are one id): the callers
    check the range (an op names the id at fault before its kernel runs)."""
    out = xp.zeros((size,) + rows.shape[1:], dtype=rows.dtype)
    n = ids.shape[0]
    if n == 0 or out.size == 0:
        return out
    ids = xp.where(ids < 0, ids + size, ids)
    order = xp.argsort(ids, kind="stable")
    ids = ids[order]
    sums = rows[order]
    first = xp.searchsorted(ids, ids, side="left")                  # where each row's run starts
    end = xp.searchsorted(ids, ids, side="right")                   # one past its last row
    j = xp.arange(n)
    place = j - first
    column = (n,) + (1,) * (rows.ndim - 1)                          # a flag per row, over its width
    for step in range((n - 1).bit_length()):                       # 2^steps ≥ n
        width = 1 << step
        partner = j + width
        takes = ((place % (2 * width) == 0) & (partner < end)).reshape(column)
        sums = xp.where(takes, sums + sums[xp.minimum(partner, n - 1)], sums)
    out[ids] = sums[first]
    return out


def flat_positions(xp: Any, shape: tuple[int, ...], index: tuple) -> Any:
    """For each element that x[index] reads from an array x of `shape`, its position in x
    flattened (C order), shaped as x[index].

    Built axis by axis from broadcast views of aranges (no array of x's size is made): the
    position is Σ_d i_d · stride_d, and x[index] of the view along d gives each element's i_d · stride_d.
    """
    total, stride = None, 1
    for axis in reversed(range(len(shape))):
        along = (xp.arange(shape[axis]) * stride).reshape([-1 if d == axis else 1 for d in range(len(shape))])
        part = xp.broadcast_to(along, shape)[index]
        total = part if total is None else total + part
        stride *= shape[axis]
    return total


def scatter_sum(xp: Any, shape: tuple[int, ...], index: tuple, values: Any) -> Any:
    """zeros(shape) with `values` (shaped as x[index]) added at `index`: ``add.at(zeros, index,
    values)`` in a fixed order.

    An index without integer arrays (slices, ints, boolean masks) reaches each position at most
    once: the values are written. One integer array (an embedding's ids) sums whole rows by id;
    any other index with integer arrays sums the values by flat position. Index arrays may be
    on the host (an op's cases give NumPy arrays): they are moved to `xp`'s device."""
    index = tuple(xp.asarray(i) if isinstance(i, np.ndarray) else i for i in index)
    if not any(_is_integer_array(i) for i in index):
        out = xp.zeros(shape, dtype=values.dtype)
        out[index] = values
        return out
    if len(index) == 1:
        return sum_rows_by_id(xp, index[0].reshape(-1), values.reshape((-1,) + shape[1:]), shape[0])
    flat = flat_positions(xp, shape, index).reshape(-1)
    return sum_rows_by_id(xp, flat, values.reshape(-1), math.prod(shape)).reshape(shape)


def _is_integer_array(i: Any) -> bool:
    """An integer index array that may repeat a position (not a 0-d one, not a NumPy integer)."""
    return getattr(i, "ndim", 0) > 0 and i.dtype.kind in "iu"
