"""Scaled dot-product attention as one op with its own dQ, dK, dV.

O = softmax(scale · Q Kᵀ, mask) V over the last two axes, batch axes broadcast. The masking
rule is softmax's (``masking.py``): True takes part, a float mask is added, masked weights
are exactly 0, a fully masked row gives a zero output.
"""

from __future__ import annotations

import numpy as np

from .base import Case, Op
from .masking import causal_keep, combine_keep, mask_scores_in_place, masked_logits
from .registry import register
from .rowsum import rowsum
from .softmax import softmax_parts

__all__ = ["ScaledDotProductAttention"]


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
             Case((5, 3), (3, 3), (3, 2), None, _FLOAT_ROW_MASKED, params={"scale": 0.7, "is_causal": True}))
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
    def forward(ctx, q, k, v, keep, bias, *, scale, is_causal):
        xp = ctx.xp
        if is_causal:
            keep = combine_keep(keep, causal_keep(xp, slice(0, q.shape[-2]), slice(0, k.shape[-2])))
        scores = (q * scale) @ xp.swapaxes(k, -1, -2)                   # S: (..., Tq, Tk)
        scores = mask_scores_in_place(xp, scores, keep, bias)
        probs, _, _ = softmax_parts(xp, scores, -1, overwrite=True)     # P, in S's memory
        out = probs @ v                                                 # (..., Tq, Dv)
        ctx.save(q=q, k=k, v=v, probs=probs, out=out, keep=keep, bias=bias)  # masks: to redraw S
        return out

    @staticmethod
    def backward(ctx, grad):
        """dV = Pᵀ dO; dP = dO Vᵀ; softmax's backward row by row gives dS = P ⊙ (dP − D) with
        D = rowsum(dP ⊙ P), which equals rowsum(dO ⊙ O) since O = P V (a (Tq, Dv) product instead
        of a (Tq, Tk) one); S = scale · Q Kᵀ gives dQ = scale · dS K and dK = scale · dSᵀ Q.
        Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
        """
        xp = ctx.xp
        need_q, need_k, need_v = ctx.needs_grad[:3]
        Q, K, V, P, O = (ctx.saved[n] for n in ("q", "k", "v", "probs", "out"))
        dO = grad
        dV = xp.swapaxes(P, -1, -2) @ dO if need_v else None              # (..., Tk, Dv)
        dP = D = dS = dQ = dK = None
        if need_q or need_k:                                            # dP, dS feed dQ and dK only
            dP = dO @ xp.swapaxes(V, -1, -2)                            # (..., Tq, Tk)
            D = rowsum(xp, dO * O)                                      # (..., Tq, 1)
            # dS is written over dP (one (Tq, Tk) array fewer) unless the stepper shows dP.
            dS = xp.subtract(dP, D, out=dP if ctx.trace is None else None)
            dS *= P                                                     # (..., Tq, Tk)
            dQ = (dS @ K) * ctx.scale if need_q else None                # (..., Tq, Dk)
            dK = (xp.swapaxes(dS, -1, -2) @ Q) * ctx.scale if need_k else None  # (..., Tk, Dk)
        if ctx.trace is not None:       # the stepper is watching: show the insides computed
            S = masked_logits(xp, (Q * ctx.scale) @ xp.swapaxes(K, -1, -2), ctx.saved["keep"],
                              ctx.saved["bias"])
            insides = {"S": S, "P": P, "dP": dP, "D": D, "dS": dS, "dQ": dQ, "dK": dK, "dV": dV}
            ctx.trace.update({n: x for n, x in insides.items() if x is not None})
        return dQ, dK, dV, None, None
