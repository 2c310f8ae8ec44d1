"""Cross-entropy with the fast row reductions in forward, and without label smoothing a backward
in one pass over the logits: (P − one_hot)·dℓ made as P·dℓ with dℓ taken off each position's
target entry, instead of a one-hot array, a difference and a product; on the CPU, no mask of the
counted positions when none is ignored."""

from __future__ import annotations

import numpy as np

from ..ops.loss import CrossEntropy, class_scale, cross_entropy_losses
from .reductions import softmax_parts
from .registry import kernel

__all__ = ["OnePassCrossEntropy"]


@kernel("cpu", "cuda", ulps=8)
class OnePassCrossEntropy(CrossEntropy):
    """Cross-entropy with softmax's row maximum and sum made fast, and a one-pass backward."""

    @staticmethod
    def forward(ctx, logits, targets, weight=None, *, ignore_index, reduction, label_smoothing=0.0):
        # On the CPU, targets none of which is ignore_index count whole, without a mask to build
        # and apply (the same numbers); on a device the test would wait for it.
        if ctx.xp is np and ignore_index is not None and not (targets == ignore_index).any():
            ignore_index = None
        return cross_entropy_losses(ctx, logits, targets, weight, softmax_parts(ctx.xp, logits, -1),
                                    ignore_index, reduction, label_smoothing)

    @staticmethod
    def backward(ctx, grad):
        """P·dℓ, then dℓ taken off each counted position's target entry (the textbook backward
        with label smoothing)."""
        if ctx.smoothing or not ctx.needs_grad[0]:
            return CrossEntropy.backward(ctx, grad)
        xp = ctx.xp
        probs, safe, counted = ctx.saved["probs"], ctx.saved["safe"], ctx.saved["counted"]
        scale = class_scale(grad, ctx.reduction, ctx.saved["n_counted"], counted)
        grad_logits = probs * scale
        per_row = grad_logits.reshape(safe.size, probs.shape[-1])   # a view: the product is fresh
        per_row[xp.arange(safe.size), safe.reshape(-1)] -= scale.reshape(-1) if scale.ndim else scale
        return (grad_logits, *(None,) * (len(ctx.needs_grad) - 1))
