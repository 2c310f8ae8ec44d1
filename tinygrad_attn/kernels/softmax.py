"""Softmax and log-softmax with the fast row reductions (``reductions.softmax_parts``): the row
maximum through a transposed copy, the row sum as a product, softmax written over the masked
logits when they are a fresh array. The sums are BLAS's, in another order: a few ulps apart."""

from __future__ import annotations

from ..ops.masking import masked_logits
from ..ops.softmax import LogSoftmax, Softmax, log_probabilities
from .reductions import softmax_parts
from .registry import kernel

__all__ = ["FastLogSoftmax", "FastSoftmax"]


@kernel("cpu", "cuda", ulps=8)
class FastSoftmax(Softmax):
    """Softmax with the row maximum and sum made fast, in the masked logits' memory."""

    @staticmethod
    def forward(ctx, x, keep, bias, *, axis):
        z = masked_logits(ctx.xp, x, keep, bias)
        y, _, _ = softmax_parts(ctx.xp, z, axis, overwrite=z is not x)
        ctx.save(y=y)
        return y


@kernel("cpu", "cuda", ulps=8)
class FastLogSoftmax(LogSoftmax):
    """Log-softmax with the row maximum and sum made fast."""

    @staticmethod
    def forward(ctx, x, keep, bias, *, axis):
        z = masked_logits(ctx.xp, x, keep, bias)
        return log_probabilities(ctx, z, *softmax_parts(ctx.xp, z, axis))
