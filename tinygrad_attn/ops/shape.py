"""Ops that change a tensor's shape without arithmetic: reshape, transpose (also swapaxes and .T),
expand, split, concat, stack.

Their backward routes each gradient element back to the input element it came from (expand's
adds over the copies).
"""

from __future__ import annotations

from itertools import accumulate

from .base import Case, Op
from .registry import register

__all__ = ["Concat", "Expand", "Reshape", "Split", "Stack", "Transpose"]


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
class Expand(Op):
    """y = x broadcast to `shape` (size-1 axes stretched, new leading axes added), as a view."""

    name = "expand"
    formula = {"x": "dx = Σ dy over the stretched and added axes"}
    cases = (Case((3, 1), params={"shape": (3, 4)}), Case((1, 4), params={"shape": (2, 5, 4)}),
             Case((), params={"shape": (2, 3)}))

    @staticmethod
    def forward(ctx, x, *, shape):
        ctx.in_shape = x.shape
        return ctx.xp.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, grad):
        """Each input element was copied along the stretched axes, so its gradient is the sum of
        its copies' gradients."""
        if not ctx.needs_grad[0]:
            return (None,)
        added = grad.ndim - len(ctx.in_shape)
        stretched = tuple(added + i for i, n in enumerate(ctx.in_shape)
                          if n == 1 and grad.shape[added + i] != 1)
        return (grad.sum(axis=tuple(range(added)) + stretched, keepdims=True).reshape(ctx.in_shape),)


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
