"""Scaled dot-product attention as one op with its own dQ, dK, dV.

O = softmax(scale · Q Kᵀ, mask) V over the last two axes, batch axes broadcast. The masking
rule is softmax's (``masking.py``): True takes part, a float mask is added, masked weights
are exactly 0, a fully masked row gives a zero output.

Grouped-query attention reaches the kernels as broadcast batch axes: q (…, Hkv, G, Tq, D) and k,
v (…, Hkv, 1, Tk, D), each kv head shared by G query heads. dK and dV are then sums over the
group, which ``group_summed_product`` computes as one product (see there).
"""

from __future__ import annotations

import numpy as np

from ..kernels.parallel import over_batch, piece
from ..kernels.reductions import rowsum
from .base import Case, Op
from .masking import causal_keep, combine_keep, mask_scores_in_place, masked_logits
from .registry import register
from .softmax import softmax_parts

__all__ = ["ScaledDotProductAttention", "group_summed_product", "shared_batch"]


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


_PADDED = np.array([[True, True, True, False, False]])
_ROW_MASKED = np.array([[True, False, True, True, False], [False] * 5, [True] * 5, [True] * 5])
_FLOAT_ROW_MASKED = np.array([[0.0, 0.0, 0.0], [-np.inf] * 3, [1.0, -np.inf, -0.5], [0.0] * 3, [0.3] * 3])


@register
class ScaledDotProductAttention(Op):
    """O = P V with P = softmax(S, mask), S = scale · Q Kᵀ; holds the whole (Tq, Tk) matrix P."""

    name = "scaled_dot_product_attention"
    formula = {
        "q": "dQ = scale · dS K,  dS = P ⊙ (dP − D),  dP = dO Vᵀ,  D = rowsum(dO ⊙ O)",
        "k": "dK = scale · dSᵀ Q",
        "v": "dV = Pᵀ dO",
        "keep": None,
        "bias": None,
    }
    residuals = {
        "q": "Q",
        "k": "K",
        "v": "V",
        "probs": "P (the softmax probabilities)",
        "out": "O (the output)",
        "keep": "the keep mask",
        "bias": "the float mask",
    }
    # Plain; causal; n_q < n_k with a fully masked row; broadcast batch axes with padding, a float
    # mask and causal; n_q > n_k causal with a float mask whose row 1 is all −inf.
    cases = (Case((3, 4), (3, 4), (3, 2), None, None, params={"scale": 0.5, "is_causal": False}),
             Case((5, 3), (5, 3), (5, 2), None, None, params={"scale": 0.6, "is_causal": True}),
             Case((4, 3), (5, 3), (5, 2), _ROW_MASKED, None, params={"scale": 0.6, "is_causal": False}),
             Case((2, 3, 3), (1, 5, 3), (2, 5, 4), _PADDED, np.array([[0.5, -1.0, 0.0, 2.0, 0.1]]),
                  params={"scale": 0.4, "is_causal": True}),
             Case((5, 3), (3, 3), (3, 2), None, _FLOAT_ROW_MASKED, params={"scale": 0.7, "is_causal": True}),
             # Grouped-query attention (2 kv heads, groups of 2 and of 3); a sliding window; a window
             # of 1 whose only key is masked for query 2 (a fully masked row).
             Case((1, 2, 2, 4, 3), (1, 2, 1, 4, 3), (1, 2, 1, 4, 2), None, None,
                  params={"scale": 0.5, "is_causal": True}),
             Case((2, 1, 3, 3, 2), (2, 1, 1, 5, 2), (2, 1, 1, 5, 3), _PADDED, None,
                  params={"scale": 0.6, "is_causal": False}),
             Case((6, 3), (6, 3), (6, 2), None, None, params={"scale": 0.6, "is_causal": True, "window": 2}),
             Case((4, 3), (4, 3), (4, 2), np.array([[True, True, False, True]]), None,
                  params={"scale": 0.8, "is_causal": True, "window": 1}))
    # What a traced backward shows, in the order it computes them (S and P come from forward).
    insides = (("S", "S = scale · Q Kᵀ (+ float mask; −inf where masked)"),
               ("P", "P = softmax(S) row by row"),
               ("dP", "dP = dO Vᵀ"),
               ("D", "D = rowsum(dP ⊙ P) = rowsum(dO ⊙ O), one number per query"),
               ("dS", "dS = P ⊙ (dP − D)"),
               ("dQ", "dQ = scale · dS K"),
               ("dK", "dK = scale · dSᵀ Q"),
               ("dV", "dV = Pᵀ dO"))

    @staticmethod
    def forward(ctx, q, k, v, keep, bias, *, scale, is_causal, window=None):
        xp = ctx.xp
        if is_causal:
            keep = combine_keep(keep, causal_keep(xp, slice(0, q.shape[-2]), slice(0, k.shape[-2]), window))
        batch = np.broadcast_shapes(*(x.shape[:-2] for x in (q, k, v, keep, bias)
                                      if x is not None and x.ndim > 2))
        probs = xp.empty(batch + (q.shape[-2], k.shape[-2]), dtype=xp.result_type(q, k))   # S, then P
        out = xp.empty(batch + (q.shape[-2], v.shape[-1]), dtype=xp.result_type(probs, v))

        def attend(i):          # the batch piece i (all of it with one thread: parallel.py)
            q_, k_, v_, keep_, bias_ = (piece(x, i, len(batch)) for x in (q, k, v, keep, bias))
            scores = xp.matmul(q_ * scale, xp.swapaxes(k_, -1, -2), out=probs[i])   # S: (..., Tq, Tk)
            mask_scores_in_place(xp, scores, keep_, bias_)
            softmax_parts(xp, scores, -1, overwrite=True)               # P, in S's memory
            xp.matmul(scores, v_, out=out[i])                           # (..., Tq, Dv)

        over_batch(attend, batch, probs.size, xp=xp)
        ctx.save(q=q, k=k, v=v, probs=probs, out=out, keep=keep, bias=bias)  # masks: to redraw S
        ctx.k_shape, ctx.v_shape = k.shape, v.shape     # dK, dV take these shapes (a shared kv head)
        return out

    @staticmethod
    def backward(ctx, grad):
        """dV = Pᵀ dO; dP = dO Vᵀ; softmax's backward row by row gives dS = P ⊙ (dP − D) with
        D = rowsum(dP ⊙ P), which equals rowsum(dO ⊙ O) since O = P V (a (Tq, Dv) product instead
        of a (Tq, Tk) one); S = scale · Q Kᵀ gives dQ = scale · dS K and dK = scale · dSᵀ Q.
        A kv head shared by a group of query heads gets the sum of their dK and dV.
        Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
        """
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
                return None, None, None
            dP = dO @ xp.swapaxes(V_, -1, -2)                               # (..., Tq, Tk)
            D = rowsum(xp, dO * O_)                                         # (..., Tq, 1)
            # dS is written over dP (one (Tq, Tk) array fewer) unless the stepper shows dP.
            dS = xp.subtract(dP, D, out=dP if ctx.trace is None else None)
            dS *= P_                                                        # (..., Tq, Tk)
            if need_q:
                xp.multiply(dS @ K_, ctx.scale, out=dQ[i])                  # (..., Tq, Dk)
            if need_k:
                xp.multiply(group_summed_product(xp, dS, Q_, ctx.k_shape), ctx.scale, out=dK[i])
            return dP, D, dS

        # A kv head shared by a group of query heads sums the group: that axis is never cut.
        summed = shared_batch(batch, ctx.k_shape) != batch or shared_batch(batch, ctx.v_shape) != batch
        parts = over_batch(gradients, batch, P.size if ctx.trace is None else 0, xp=xp,
                           fixed=len(batch) - 1 if summed else None)
        dP, D, dS = parts[0]                                                # for the stepper: one part
        if ctx.trace is not None:       # the stepper is watching: show the insides computed
            S = masked_logits(xp, (Q * ctx.scale) @ xp.swapaxes(K, -1, -2), ctx.saved["keep"],
                              ctx.saved["bias"])
            # A kv head shared by a group: dK and dV shown one matrix per query head (their sum is sent).
            shown_k, shown_v = dK, dV
            if dK is not None and dK.shape[:-2] != dS.shape[:-2]:
                shown_k = (xp.swapaxes(dS, -1, -2) @ Q) * ctx.scale
            if dV is not None and dV.shape[:-2] != P.shape[:-2]:
                shown_v = xp.swapaxes(P, -1, -2) @ grad
            insides = {"S": S, "P": P, "dP": dP, "D": D, "dS": dS, "dQ": dQ, "dK": shown_k, "dV": shown_v}
            ctx.trace.update({n: x for n, x in insides.items() if x is not None})
        return dQ, dK, dV, None, None
