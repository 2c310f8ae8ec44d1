"""The scatter-adds of the copying ops repeatable on the GPU: the backward of repeat_interleave
and of the copying pads sums the gradients of each element's copies in the fixed pairwise order
of ``scatter.py``, where CuPy's ``add.at`` adds them with atomics in an order that changes from
run to run. A few ulps from the textbook's left-to-right order; the same bits on every run."""

from __future__ import annotations

from ..ops.movement import PadCopy, RepeatInterleave
from .registry import kernel
from .scatter import sum_rows_by_id

__all__ = ["PairwiseScatterPadCopy", "PairwiseScatterRepeatInterleave"]


@kernel("cuda", ulps=64)
class PairwiseScatterRepeatInterleave(RepeatInterleave):
    """repeat_interleave whose backward sums each element's copies in a fixed order."""

    @staticmethod
    def backward(ctx, grad):
        """dxᵢ = Σ of dy over the copies of xᵢ: the rows along the axis summed by their source."""
        if not ctx.needs_grad[0]:
            return (None,)
        xp, axis = ctx.xp, ctx.axis
        n = ctx.in_shape[axis]
        source = xp.repeat(xp.arange(n), ctx.repeats)
        return (xp.moveaxis(sum_rows_by_id(xp, source, xp.moveaxis(grad, axis, 0), n), 0, axis),)


@kernel("cuda", ulps=64)
class PairwiseScatterPadCopy(PadCopy):
    """pad_copy (reflect, replicate, circular) whose backward sums each element's copies in a
    fixed order."""

    @staticmethod
    def backward(ctx, grad):
        """Axis by axis in reverse order, each element of x gets the sum of the gradients of the
        positions that copied it."""
        if not ctx.needs_grad[0]:
            return (None,)
        xp = ctx.xp
        for axis in reversed(range(len(ctx.indices))):
            index = ctx.indices[axis]
            if index is not None:
                summed = sum_rows_by_id(xp, xp.asarray(index), xp.moveaxis(grad, axis, 0), ctx.in_shape[axis])
                grad = xp.moveaxis(summed, 0, axis)
        return (grad,)
