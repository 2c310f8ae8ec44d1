"""Ops that move, select or combine elements without arithmetic on them.

reshape, transpose (also swapaxes and .T), getitem, split, concat, stack, masked_fill, where.
Their backward routes each gradient element back to the input element it came from.
"""

from __future__ import annotations

from itertools import accumulate

import numpy as np

from .base import Case, Op
from .registry import register

__all__ = ["Concat", "GetItem", "MaskedFill", "Reshape", "Split", "Stack", "Transpose", "Where"]


@register
class Reshape(Op):
    """y = x viewed with a new shape (same elements, row-major order)."""

    name = "reshape"
    formula = {"x": "dx = reshape(dy, x.shape)"}
    cases = (Case((3, 4), params={"shape": (2, 6)}), Case((2, 3, 4), params={"shape": (4, -1)}))

    @staticmethod
    def forward(ctx, x, *, shape):
        ctx.in_shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        """Reshaping is a bijection of positions, so the gradient is reshaped back."""
        return (grad.reshape(ctx.in_shape) if ctx.needs_grad[0] else None,)


@register
class Transpose(Op):
    """y = x with its axes permuted: y.shape[i] = x.shape[axes[i]]."""

    name = "transpose"
    formula = {"x": "dx = transpose(dy, argsort(axes))"}
    cases = (Case((3, 4), params={"axes": (1, 0)}), Case((2, 3, 4), params={"axes": (2, 0, 1)}))

    @staticmethod
    def forward(ctx, x, *, axes):
        return x.transpose(axes)

    @staticmethod
    def backward(ctx, grad):
        """The inverse permutation puts every gradient element back in its place."""
        inverse = sorted(range(len(ctx.axes)), key=ctx.axes.__getitem__)    # argsort of the axes
        return (grad.transpose(inverse) if ctx.needs_grad[0] else None,)


@register
class GetItem(Op):
    """y = x[index]: basic slicing (negative steps too) and integer-array indexing.

    The index reaches forward already checked against x's shape by ``Tensor.__getitem__``, which
    raises IndexOutOfRange there, so a bad index never gets as far as an op or a graph.
    """

    name = "getitem"
    formula = {"x": "dx = scatter_add(zeros_like(x), index, dy)"}
    cases = (Case((5, 4), params={"index": (slice(1, 4), slice(None, None, -2))}),
             Case((5, 4), params={"index": (np.array([0, 2, 2, 4]),)}),
             Case((3, 5), params={"index": (slice(None), np.array([[1, 1], [0, 4]]))}),
             Case((4, 3), params={"index": (2, -1)}))

    @staticmethod
    def forward(ctx, x, *, index):
        ctx.in_shape = x.shape
        return x[index]

    @staticmethod
    def backward(ctx, grad):
        """Each selected element passes its gradient back; an index chosen twice gets both
        (scatter-add, so repeated integer indices accumulate instead of overwriting)."""
        if not ctx.needs_grad[0]:
            return (None,)
        xp = ctx.xp
        index = ctx.index
        if xp is np and len(index) == 1 and getattr(index[0], "dtype", np.dtype("O")).kind in "iu":
            return (_scatter_add_rows(ctx.in_shape, index[0], grad),)
        grad_x = xp.zeros(ctx.in_shape, dtype=grad.dtype)
        xp.add.at(grad_x, index, grad)
        return (grad_x,)


def _scatter_add_rows(shape: tuple[int, ...], rows: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """zeros(shape) with each row of `grad` added at its id in `rows` (x[ids], as in an
    embedding): the ids sorted so that equal ones are neighbours, each run of rows summed with
    ``add.reduceat``. The same sums as ``np.add.at``, which goes element by element and takes
    about 6× as long at (2048 ids, 64 features); CuPy's ``add.at`` is a fast scatter already."""
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


@register
class Split(Op):
    """y = the slice [start, stop) of x along `axis`: one piece of ``Tensor.split``."""

    name = "split"
    formula = {"x": "dx = zeros, with dy placed at [start:stop] along axis"}
    cases = (Case((6, 3), params={"axis": 0, "start": 2, "stop": 5}),
             Case((2, 7), params={"axis": 1, "start": 0, "stop": 3}))

    @staticmethod
    def forward(ctx, x, *, axis, start, stop):
        ctx.in_shape = x.shape
        return x[(slice(None),) * axis + (slice(start, stop),)]

    @staticmethod
    def backward(ctx, grad):
        """The piece's gradient goes back to its place; the rest of x gets 0."""
        if not ctx.needs_grad[0]:
            return (None,)
        grad_x = ctx.xp.zeros(ctx.in_shape, dtype=grad.dtype)
        grad_x[(slice(None),) * ctx.axis + (slice(ctx.start, ctx.stop),)] = grad
        return (grad_x,)


@register
class Concat(Op):
    """y = the inputs joined along an existing `axis`."""

    name = "concat"
    formula = {"xs": "dxᵢ = dy[offsetᵢ : offsetᵢ + sizeᵢ] along axis"}
    cases = (Case((2, 3), (4, 3), params={"axis": 0}), Case((2, 1), (2, 3), (2, 2), params={"axis": 1}))

    @staticmethod
    def forward(ctx, *xs, axis):
        ctx.sizes = [x.shape[axis] for x in xs]
        return ctx.xp.concatenate(xs, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        """Each input owns a contiguous run along the axis and takes that run of dy."""
        offsets = list(accumulate(ctx.sizes))[:-1]
        pieces = ctx.xp.split(grad, offsets, axis=ctx.axis)
        return tuple(piece if need else None for piece, need in zip(pieces, ctx.needs_grad))


@register
class Stack(Op):
    """y = the inputs (all of one shape) joined along a new `axis`."""

    name = "stack"
    formula = {"xs": "dxᵢ = dy[i] along axis"}
    cases = (Case((2, 3), (2, 3), params={"axis": 0}), Case((4,), (4,), (4,), params={"axis": 1}))

    @staticmethod
    def forward(ctx, *xs, axis):
        return ctx.xp.stack(xs, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        """Input i is the slice i of the new axis, so it takes that slice of dy."""
        pieces = ctx.xp.moveaxis(grad, ctx.axis, 0)
        return tuple(piece if need else None for piece, need in zip(pieces, ctx.needs_grad))


@register
class MaskedFill(Op):
    """y = value where mask is True, x elsewhere (mask broadcasts against x, as in PyTorch)."""

    name = "masked_fill"
    formula = {"x": "dx = dy ⊙ ¬mask", "mask": None}
    residuals = {"mask": "the fill mask"}
    cases = (Case((3, 4), np.array([[True, False, False, True]]), params={"value": -5.0}),
             Case((2, 3), np.array([[True, True, True], [False, True, False]]), params={"value": 0.0}))

    @staticmethod
    def forward(ctx, x, mask, *, value):
        ctx.save(mask=mask)
        return ctx.xp.where(mask, ctx.xp.asarray(value, dtype=x.dtype), x)

    @staticmethod
    def backward(ctx, grad):
        """A filled position no longer depends on x (slope 0); the others pass dy through."""
        return (grad * ~ctx.saved["mask"] if ctx.needs_grad[0] else None, None)


@register
class Where(Op):
    """y = a where cond is True, b elsewhere (all three broadcast together)."""

    name = "where"
    formula = {"cond": None, "a": "da = dy ⊙ cond", "b": "db = dy ⊙ ¬cond"}
    residuals = {"cond": "the condition"}
    cases = (Case(np.array([[True, False, True]]), (2, 3), (2, 3)),
             Case(np.array([True, False]), (3, 2), (1,)))

    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.save(cond=cond)
        return ctx.xp.where(cond, a, b)

    @staticmethod
    def backward(ctx, grad):
        """Each output element came from exactly one of a and b, chosen by cond."""
        cond = ctx.saved["cond"]
        return (None, grad * cond if ctx.needs_grad[1] else None,
                grad * ~cond if ctx.needs_grad[2] else None)
