"""Ops that copy elements to new places without arithmetic: flip, roll, repeat,
repeat_interleave, pad, diagonal, and tril/triu (keep one triangle, zero the other).

Every output element is one input element (or a constant), so each backward sends every gradient
element back to the input element it came from, adding where one input element was copied to
several outputs.
"""

from __future__ import annotations

from ..guards.shape_arguments import source_indices
from .base import Case, Op
from .registry import register

__all__ = ["Diagonal", "Flip", "Pad", "PadCopy", "Repeat", "RepeatInterleave", "Roll", "Tril", "Triu"]


@register
class Flip(Op):
    """y = x with the order of its elements reversed along `axis` (a tuple of axes)."""

    name = "flip"
    formula = {"x": "dx = flip(dy, axis)"}
    cases = (Case((3, 4), params={"axis": (1,)}), Case((2, 3, 4), params={"axis": (0, 2)}))

    @staticmethod
    def forward(ctx, x, *, axis):
        return ctx.xp.flip(x, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        """Flipping is its own inverse: the gradient is flipped back."""
        return (ctx.xp.flip(grad, axis=ctx.axis) if ctx.needs_grad[0] else None,)


@register
class Roll(Op):
    """y = x shifted cyclically by `shifts` along `axis` (the flattened array when axis is None)."""

    name = "roll"
    formula = {"x": "dx = roll(dy, −shifts, axis)"}
    cases = (Case((5,), params={"shifts": 2, "axis": None}),
             Case((3, 4), params={"shifts": (1, -1), "axis": (0, 1)}),
             Case((3, 4), params={"shifts": 5, "axis": None}))

    @staticmethod
    def forward(ctx, x, *, shifts, axis):
        return ctx.xp.roll(x, shifts, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        """Rolling back by the opposite shifts returns every gradient element to its place."""
        if not ctx.needs_grad[0]:
            return (None,)
        back = tuple(-s for s in ctx.shifts) if isinstance(ctx.shifts, tuple) else -ctx.shifts
        return (ctx.xp.roll(grad, back, axis=ctx.axis),)


@register
class Repeat(Op):
    """y = x tiled `repeats[i]` times along axis i (PyTorch's ``repeat``, NumPy's ``tile``).

    `repeats` may be longer than x.ndim: x then gets leading axes of size 1 first.
    """

    name = "repeat"
    formula = {"x": "dx = Σ over the copies of dy (dy viewed as (r₀, n₀, r₁, n₁, …), summed over the r)"}
    cases = (Case((2, 3), params={"repeats": (2, 3)}), Case((3,), params={"repeats": (2, 1, 2)}))

    @staticmethod
    def forward(ctx, x, *, repeats):
        ctx.in_shape = x.shape
        return ctx.xp.tile(x.reshape((1,) * (len(repeats) - x.ndim) + x.shape), repeats)

    @staticmethod
    def backward(ctx, grad):
        """Tile copy i along an axis of length n holds positions [i·n, (i + 1)·n): viewing dy as
        (copies, n) per axis and summing over the copies adds the gradients of every copy."""
        if not ctx.needs_grad[0]:
            return (None,)
        sizes = (1,) * (len(ctx.repeats) - len(ctx.in_shape)) + ctx.in_shape
        split = [d for r, n in zip(ctx.repeats, sizes) for d in (r, n)]
        return (grad.reshape(split).sum(axis=tuple(range(0, len(split), 2))).reshape(ctx.in_shape),)


@register
class RepeatInterleave(Op):
    """y = each element of x repeated along `axis` (`repeats` times, or repeats[i] times for
    element i: a tuple of ints), as numpy.repeat."""

    name = "repeat_interleave"
    formula = {"x": "dxᵢ = Σ of dy over the repeats[i] copies of xᵢ"}
    cases = (Case((3, 2), params={"repeats": 2, "axis": 0}),
             Case((2, 3), params={"repeats": (1, 0, 3), "axis": 1}),
             Case((2, 3), params={"repeats": 6, "axis": 0}))

    @staticmethod
    def forward(ctx, x, *, repeats, axis):
        ctx.in_shape = x.shape
        return ctx.xp.repeat(x, repeats, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        """Output position j along the axis is a copy of input element source[j]; scatter-adding
        dy at those sources sums each element's copies."""
        if not ctx.needs_grad[0]:
            return (None,)
        xp, axis = ctx.xp, ctx.axis
        n = ctx.in_shape[axis]
        source = xp.repeat(xp.arange(n), ctx.repeats)
        grad_x = xp.zeros((n,) + tuple(s for i, s in enumerate(ctx.in_shape) if i != axis), dtype=grad.dtype)
        xp.add.at(grad_x, source, xp.moveaxis(grad, axis, 0))
        return (xp.moveaxis(grad_x, 0, axis),)


@register
class Pad(Op):
    """y = x with `value` added around it: `widths[i]` = (before, after) elements along axis i."""

    name = "pad"
    formula = {"x": "dx = dy with the padding cut away"}
    cases = (Case((3, 4), params={"widths": ((0, 0), (1, 2)), "value": 0.0}),
             Case((2, 3), params={"widths": ((2, 1), (0, 3)), "value": -1.0}))

    @staticmethod
    def forward(ctx, x, *, widths, value):
        return ctx.xp.pad(x, widths, constant_values=value)

    @staticmethod
    def backward(ctx, grad):
        """The padding is a constant (slope 0); the rest of y is x, shifted by the widths before."""
        if not ctx.needs_grad[0]:
            return (None,)
        return (grad[tuple(slice(a, n - b) for (a, b), n in zip(ctx.widths, grad.shape))],)


@register
class PadCopy(Op):
    """y = x padded with copies of its own elements (reflect, replicate or circular): along each
    padded axis, y[k] = x[index[k]], `indices` holding one source index array per axis (None: kept)."""

    name = "pad_copy"
    formula = {"x": "dx = dy scatter-added to the elements each position copies (a copied element "
                    "gathers every copy's gradient)"}
    cases = (Case((3, 4), params={"indices": (None, source_indices(4, 2, 3, "reflect"))}),
             Case((3, 4), params={"indices": (source_indices(3, 2, 1, "replicate"), None)}),
             Case((2, 3), params={"indices": (source_indices(2, 1, 2, "circular"),
                                              source_indices(3, -1, 2, "circular"))}),
             Case((3, 2), params={"indices": (source_indices(3, 5, 4, "replicate"), None)}))

    @staticmethod
    def forward(ctx, x, *, indices):
        ctx.in_shape = x.shape
        for axis, index in enumerate(indices):
            if index is not None:
                x = ctx.xp.take(x, ctx.xp.asarray(index), axis=axis)
        return x

    @staticmethod
    def backward(ctx, grad):
        """y is a gather of x along each padded axis, so its gradient is the scatter-add back: each
        element of x receives the sum of the gradients of every position that copied it (an edge
        element under replicate gets all of its copies'), axis by axis in reverse order."""
        if not ctx.needs_grad[0]:
            return (None,)
        xp = ctx.xp
        for axis in reversed(range(len(ctx.indices))):
            index = ctx.indices[axis]
            if index is None:
                continue
            moved = xp.moveaxis(grad, axis, 0)
            back = xp.zeros((ctx.in_shape[axis],) + moved.shape[1:], dtype=grad.dtype)
            xp.add.at(back, xp.asarray(index), moved)
            grad = xp.moveaxis(back, 0, axis)
        return (grad,)


@register
class Diagonal(Op):
    """y = the diagonal of x in the plane (axis1, axis2), shifted by `offset`, as a last axis."""

    name = "diagonal"
    formula = {"x": "dx = zeros with dy written on the diagonal"}
    cases = (Case((4, 4), params={"offset": 0, "axis1": 0, "axis2": 1}),
             Case((2, 3, 5), params={"offset": 1, "axis1": 1, "axis2": 2}),
             Case((4, 3), params={"offset": -1, "axis1": 0, "axis2": 1}))

    @staticmethod
    def forward(ctx, x, *, offset, axis1, axis2):
        ctx.in_shape = x.shape
        return ctx.xp.diagonal(x, offset, axis1, axis2)

    @staticmethod
    def backward(ctx, grad):
        """Each diagonal element came from x[…, i, i + offset, …]; every other element of x has
        slope 0."""
        if not ctx.needs_grad[0]:
            return (None,)
        xp = ctx.xp
        grad_x = xp.zeros(ctx.in_shape, dtype=grad.dtype)
        plane = xp.moveaxis(grad_x, (ctx.axis1, ctx.axis2), (-2, -1))       # a view of grad_x
        i = xp.arange(grad.shape[-1])
        plane[..., i + max(-ctx.offset, 0), i + max(ctx.offset, 0)] = grad
        return (grad_x,)


@register
class Tril(Op):
    """y = x on and below diagonal `k` of the last two axes, 0 above it."""

    name = "tril"
    formula = {"x": "dx = tril(dy, k)"}
    cases = (Case((4, 4), params={"k": 0}), Case((2, 3, 5), params={"k": 1}))

    @staticmethod
    def forward(ctx, x, *, k):
        return ctx.xp.tril(x, k)

    @staticmethod
    def backward(ctx, grad):
        """Kept elements pass dy through; zeroed ones are constants (slope 0)."""
        return (ctx.xp.tril(grad, ctx.k) if ctx.needs_grad[0] else None,)


@register
class Triu(Op):
    """y = x on and above diagonal `k` of the last two axes, 0 below it."""

    name = "triu"
    formula = {"x": "dx = triu(dy, k)"}
    cases = (Case((4, 4), params={"k": 0}), Case((2, 3, 5), params={"k": -1}))

    @staticmethod
    def forward(ctx, x, *, k):
        return ctx.xp.triu(x, k)

    @staticmethod
    def backward(ctx, grad):
        """Kept elements pass dy through; zeroed ones are constants (slope 0)."""
        return (ctx.xp.triu(grad, ctx.k) if ctx.needs_grad[0] else None,)
