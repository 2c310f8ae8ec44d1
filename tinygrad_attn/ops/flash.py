"""Flash attention: the same result as ``scaled_dot_product_attention``, computed in key blocks.

Forward walks the keys in blocks of ``block_size`` with an online softmax (a running row maximum
m and running sum l, rescaling what was accumulated whenever m grows) and saves only the output
O and the row log-sum-exp L = m + log l. Backward recomputes each block's probabilities as
P = exp(S − L), exactly the forward's, so neither pass holds a (Tq, Tk) array: only (Tq, block).
"""

from __future__ import annotations

import numpy as np

from . import register
from .attention import CASES, FORMULA, causal_keep, combine_keep
from .base import Case, Op
from .softmax import masked_logits


def _block_scores(ctx, q, k, keep, bias, start, stop):
    """Masked scores S[..., :, start:stop] of one key block: (..., Tq, stop − start)."""
    xp = ctx.xp
    part = lambda m: None if m is None else (m if m.shape[-1] == 1 else m[..., start:stop])
    block_keep = part(keep)
    if ctx.is_causal:
        block_keep = combine_keep(xp, block_keep, causal_keep(xp, q.shape[-2], k.shape[-2], start, stop))
    scores = (q @ xp.swapaxes(k[..., start:stop, :], -1, -2)) * ctx.scale
    return masked_logits(xp, scores, block_keep, part(bias))


def _blocks(ctx, n_q, n_k):
    """Key blocks (start, stop); with is_causal, blocks that every query is too early to see are skipped."""
    last = min(n_k, n_q) if ctx.is_causal else n_k
    return [(s, min(s + ctx.block_size, n_k)) for s in range(0, last, ctx.block_size)]


@register
class FlashAttention(Op):
    """O = softmax(scale · Q Kᵀ, mask) V, key block by key block with an online softmax."""

    name = "flash_attention"
    formula = FORMULA
    cases = tuple(Case(*c.specs, params={**c.params, "block_size": 2}) for c in CASES)

    @staticmethod
    def forward(ctx, q, k, v, keep, bias, *, scale, is_causal, block_size):
        xp = ctx.xp
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        n_q, n_k = q.shape[-2], k.shape[-2]
        acc = xp.zeros(batch + (n_q, v.shape[-1]), dtype=q.dtype)      # (..., Tq, Dv)
        row_max = xp.full(batch + (n_q, 1), -xp.inf, dtype=q.dtype)     # m
        row_sum = xp.zeros(batch + (n_q, 1), dtype=q.dtype)             # l
        zero = xp.asarray(0, dtype=q.dtype)
        for start, stop in _blocks(ctx, n_q, n_k):
            scores = _block_scores(ctx, q, k, keep, bias, start, stop)  # (..., Tq, Bk)
            new_max = xp.maximum(row_max, scores.max(axis=-1, keepdims=True))
            safe_max = xp.where(xp.isfinite(new_max), new_max, zero)    # all masked so far: 0
            rescale = xp.exp(row_max - safe_max)                        # old terms, to the new max
            e = xp.exp(scores - safe_max)
            row_sum = row_sum * rescale + e.sum(axis=-1, keepdims=True)
            acc = acc * rescale + e @ v[..., start:stop, :]
            row_max = new_max
        alive = row_sum > 0                                             # some key takes part
        out = acc / xp.where(alive, row_sum, 1)
        lse = xp.where(alive, row_max + xp.log(xp.where(alive, row_sum, 1)), xp.inf)
        ctx.save(q=q, k=k, v=v, keep=keep, bias=bias, out=out, lse=lse)
        return out

    @staticmethod
    def backward(ctx, grad):
        """Per key block: P = exp(S − L) (L = +inf on a fully masked row makes P = 0), then the
        plain kernel's formulas; rowsum(dP ⊙ P) = rowsum(dO ⊙ O) = D is computed once up front.
        Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
        """
        xp = ctx.xp
        q, k, v, keep, bias, out, lse = (ctx.saved[n] for n in ("q", "k", "v", "keep", "bias", "out", "lse"))
        n_q, n_k = q.shape[-2], k.shape[-2]
        batch = grad.shape[:-2]
        delta = (grad * out).sum(axis=-1, keepdims=True)                # D: (..., Tq, 1)
        grad_q = xp.zeros(batch + q.shape[-2:], dtype=grad.dtype)
        grad_k = xp.zeros(batch + k.shape[-2:], dtype=grad.dtype)
        grad_v = xp.zeros(batch + v.shape[-2:], dtype=grad.dtype)
        for start, stop in _blocks(ctx, n_q, n_k):
            probs = xp.exp(_block_scores(ctx, q, k, keep, bias, start, stop) - lse)  # (..., Tq, Bk)
            grad_v[..., start:stop, :] = xp.swapaxes(probs, -1, -2) @ grad
            grad_s = probs * (grad @ xp.swapaxes(v[..., start:stop, :], -1, -2) - delta)
            grad_q += grad_s @ k[..., start:stop, :]
            grad_k[..., start:stop, :] = xp.swapaxes(grad_s, -1, -2) @ q
        return grad_q * ctx.scale, grad_k * ctx.scale, grad_v, None, None
