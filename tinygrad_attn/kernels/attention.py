"""Attention in less memory and time: the score matrix made once and turned into P where it lies,
the causal mask made once per size and kept (``causal_masks``: no (n_q, n_k) mask array per call),
the batch cut among threads (``parallel.over_batch``), the gradients written into arrays made
beforehand, dS written over dP, and a kv head's dK and dV summed over its group of query heads by
one product instead of by the engine. The same numbers as ``ops/attention.py`` up to the row
sums' order (a few ulps).

Grouped-query attention reaches the kernel as broadcast batch axes: q (…, Hkv, G, Tq, D) and k,
v (…, Hkv, 1, Tk, D), each kv head shared by G query heads.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..ops.attention import ScaledDotProductAttention
from ..ops.masking import causal_keep, combine_keep, mask_scores_in_place
from .parallel import over_batch, piece
from .reductions import rowsum, softmax_parts
from .registry import kernel

__all__ = ["FusedAttention", "causal_masks", "group_summed_product", "shared_batch"]


KEPT_MASK_POSITIONS = 1 << 24     # n_q · n_k up to which a size's masks are kept (32 MiB a pair)


def causal_masks(xp: Any, n_q: int, n_k: int, window: int | None) -> tuple[Any, Any]:
    """The causal keep mask (n_q, n_k) of ``masking.causal_keep`` and its complement, the hidden
    positions: made once per size, device and window and kept for the calls that follow (read-only
    on the CPU), up to ``KEPT_MASK_POSITIONS`` positions; made for the call alone beyond.

    The fused kernel writes −inf over S where `hidden` is True, in place, and saves `keep` as the
    op's residual: a training step makes neither array again. Both hold n_q · n_k bytes, a
    quarter of one float32 score matrix of one head; the last four sizes are kept."""
    if n_q * n_k > KEPT_MASK_POSITIONS:
        return _made_causal_masks(xp, None, n_q, n_k, window)
    return _kept_causal_masks(xp, None if xp is np else xp.cuda.Device().id, n_q, n_k, window)


def _made_causal_masks(xp: Any, device: int | None, n_q: int, n_k: int,
                       window: int | None) -> tuple[Any, Any]:
    """`causal_masks` made anew (`device` only keys the kept ones: the arrays are made on the
    current device)."""
    keep = causal_keep(xp, slice(0, n_q), slice(0, n_k), window)
    hidden = ~keep
    if xp is np:
        keep.flags.writeable = hidden.flags.writeable = False
    return keep, hidden


_kept_causal_masks = functools.lru_cache(maxsize=4)(_made_causal_masks)


def shared_batch(batch: tuple[int, ...], shared: tuple[int, ...]) -> tuple[int, ...]:
    """The batch shape of the gradient of a key or value input of shape `shared`: `batch` with its
    last axis (the group of query heads, axis −3 of the arrays) summed to 1 where `shared` has 1
    there and `batch` more; else `batch` (the engine sums any other broadcast axis)."""
    if batch and len(shared) == len(batch) + 2 and shared[-3] == 1 and batch[-1] > 1:
        return batch[:-1] + (1,)
    return batch


def group_summed_product(xp, a, b, shared: tuple[int, ...]):
    """aᵀ b over the last two axes (dK = dSᵀ Q, dV = Pᵀ dO), summed over the group of query heads
    that share a kv input of shape `shared`.

    With a (…, G, Tq, Tk) and b (…, G, Tq, D) the group is folded into the rows: a as
    (…, 1, G·Tq, Tk) and b as (…, 1, G·Tq, D), so one product gives Σ_g a_gᵀ b_g and no
    (…, G, Tk, D) array of per-head parts is made.
    """
    batch = shared_batch(a.shape[:-2], shared)
    if batch != a.shape[:-2]:
        b = xp.broadcast_to(b, a.shape[:-2] + b.shape[-2:])
        a, b = (x.reshape(batch + (-1, x.shape[-1])) for x in (a, b))
    return xp.swapaxes(a, -1, -2) @ b


@kernel("cpu", "cuda", ulps=64)
class FusedAttention(ScaledDotProductAttention):
    """Attention's forward and backward over the batch in pieces, in place where it can."""

    @staticmethod
    def forward(ctx, q, k, v, keep, bias, *, scale, is_causal, window=None):
        xp = ctx.xp
        causal, hidden = causal_masks(xp, q.shape[-2], k.shape[-2], window) if is_causal else (None, None)
        batch = np.broadcast_shapes(*(x.shape[:-2] for x in (q, k, v, keep, bias)
                                      if x is not None and x.ndim > 2))
        probs = xp.empty(batch + (q.shape[-2], k.shape[-2]), dtype=xp.result_type(q, k))   # S, then P
        out = xp.empty(batch + (q.shape[-2], v.shape[-1]), dtype=xp.result_type(probs, v))

        def attend(i):          # the batch piece i (all of it with one thread: parallel.py)
            q_, k_, v_, keep_, bias_ = (piece(x, i, len(batch)) for x in (q, k, v, keep, bias))
            scores = xp.matmul(q_ * scale, xp.swapaxes(k_, -1, -2), out=probs[i])   # S: (..., Tq, Tk)
            mask_scores_in_place(xp, scores, keep_, bias_)                 # the user's masks
            if hidden is not None:                                          # the causal one, kept
                xp.copyto(scores, xp.asarray(-xp.inf, dtype=scores.dtype), where=hidden)
            softmax_parts(xp, scores, -1, overwrite=True)               # P, in S's memory
            xp.matmul(scores, v_, out=out[i])                           # (..., Tq, Dv)

        over_batch(attend, batch, probs.size, xp=xp)
        if is_causal:                                   # the textbook op's keep: causal and the user's
            keep = combine_keep(keep, causal)
        ctx.save(q=q, k=k, v=v, probs=probs, out=out, keep=keep, bias=bias)  # masks: to redraw S
        ctx.k_shape, ctx.v_shape = k.shape, v.shape     # dK, dV take these shapes (a shared kv head)
        return out

    @staticmethod
    def backward(ctx, grad):
        """The textbook formulas per batch piece, into arrays made beforehand; dS written over dP;
        a kv head shared by a group of query heads gets its group's sum as one product."""
        xp = ctx.xp
        need_q, need_k, need_v = ctx.needs_grad[:3]
        Q, K, V, P, O = (ctx.saved[n] for n in ("q", "k", "v", "probs", "out"))
        batch = P.shape[:-2]
        # The gradients' arrays, each piece writes its part (read only the residuals a gradient needs).
        ds_type = xp.result_type(grad, V, O, P) if need_q or need_k else None
        dQ = (xp.empty(batch + (P.shape[-2], ctx.k_shape[-1]), dtype=xp.result_type(ds_type, K))
              if need_q else None)
        dK = (xp.empty(shared_batch(batch, ctx.k_shape) + ctx.k_shape[-2:], dtype=xp.result_type(ds_type, Q))
              if need_k else None)
        dV = (xp.empty(shared_batch(batch, ctx.v_shape) + ctx.v_shape[-2:], dtype=xp.result_type(P, grad))
              if need_v else None)

        def gradients(i):       # the batch piece i (all of it with one thread: parallel.py)
            Q_, K_, V_, P_, O_, dO = (piece(x, i, len(batch)) for x in (Q, K, V, P, O, grad))
            if need_v:
                dV[i] = group_summed_product(xp, P_, dO, ctx.v_shape)           # (..., Tk, Dv)
            if not (need_q or need_k):                                      # dP, dS feed dQ and dK only
                return
            dP = dO @ xp.swapaxes(V_, -1, -2)                               # (..., Tq, Tk)
            D = rowsum(xp, dO * O_)                                         # (..., Tq, 1)
            dS = xp.subtract(dP, D, out=dP)                                 # over dP: one array fewer
            dS *= P_                                                        # (..., Tq, Tk)
            if need_q:
                xp.multiply(dS @ K_, ctx.scale, out=dQ[i])                  # (..., Tq, Dk)
            if need_k:
                xp.multiply(group_summed_product(xp, dS, Q_, ctx.k_shape), ctx.scale, out=dK[i])

        # A kv head shared by a group of query heads sums the group: that axis is never cut.
        summed = shared_batch(batch, ctx.k_shape) != batch or shared_batch(batch, ctx.v_shape) != batch
        over_batch(gradients, batch, P.size, xp=xp, fixed=len(batch) - 1 if summed else None)
        return dQ, dK, dV, None, None
