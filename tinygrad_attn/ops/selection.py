"""Ops that select elements: getitem (basic slicing, integer-array and boolean indexing), gather
and scatter_add along one axis, masked_fill, where, and dropout (with a keep-mask drawn by
``F.dropout``).

gather and scatter_add are each other's backward. Their `index` has x's number of axes; along
`axis` it holds positions, and on every other axis d it covers the first index.shape[d]
positions. For axis 0 of a 2-D x: gather: y[i, j] = x[index[i, j], j]; scatter_add: y = x, then
y[index[i, j], j] += src[i, j]. The indices reach the ops already checked to lie in
[0, x.shape[axis]).
"""

from __future__ import annotations

import numpy as np

from .base import Case, Op
from .registry import register

__all__ = ["Dropout", "Gather", "GetItem", "MaskedFill", "ScatterAdd", "Where", "positions"]


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
             Case((4, 3), params={"index": (2, -1)}),
             # one row many times (−1 is row 5 too); all rows distinct, a 2-d index; no row at all
             Case((6, 3), params={"index": (np.array([5, 1, 5, 5, 0, 5, 5, 5, 5, 2, 5, -1]),)}),
             Case((4, 2, 2), params={"index": (np.array([[3, 0], [1, 2]]),)}),
             Case((3, 2), params={"index": (np.array([], dtype=np.intp),)}))

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
        grad_x = ctx.xp.zeros(ctx.in_shape, dtype=grad.dtype)
        ctx.xp.add.at(grad_x, ctx.index, grad)
        return (grad_x,)


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
             Case((2, 4, 2), _INDEX[:, :, None], params={"axis": 1}),
             Case((2, 4), np.array([[3, 3, 3, 3, 3, 0], [1, 3, 3, 3, 3, 3]]), params={"axis": 1}))

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
             Case((2, 4), _INDEX, (2, 5), params={"axis": 1}),
             Case((2, 4), np.full((2, 6), 2), (2, 6), params={"axis": 1}))

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


@register
class Dropout(Op):
    """y = x ⊙ keep / (1 − p): kept elements are scaled up so that E[y] = x."""

    name = "dropout"
    formula = {"x": "dx = dy ⊙ keep / (1 − p)", "keep": None}
    residuals = {"keep": "the keep mask"}
    cases = (Case((3, 4), np.array([[True, False, True, True]] * 3), params={"p": 0.25}),
             Case((2, 3, 2), np.arange(12).reshape(2, 3, 2) % 3 > 0, params={"p": 0.5}))

    @staticmethod
    def forward(ctx, x, keep, *, p):
        ctx.save(keep=keep)
        return x * keep * (1 / (1 - p))

    @staticmethod
    def backward(ctx, grad):
        """Each element is x times a constant (0 or 1/(1 − p)), so the gradient is scaled alike."""
        return (grad * ctx.saved["keep"] * (1 / (1 - ctx.p)) if ctx.needs_grad[0] else None, None)
