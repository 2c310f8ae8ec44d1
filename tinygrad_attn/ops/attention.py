"""Scaled dot-product attention as one op with its own dQ, dK, dV.

O = softmax(scale · Q Kᵀ, mask) V over the last two axes, batch axes broadcast. The masking
rule is softmax's (``masking.py``): True takes part, a float mask is added, masked weights
are exactly 0, a fully masked row gives a zero output.
"""

from __future__ import annotations

import numpy as np

from . import register
from .base import Case, Op
from .masking import causal_keep, combine_keep, masked_logits, masked_softmax
from .reduce import sum_keepdims

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
               ("dS", "dS = P ⊙ (dP − D),  D = rowsum(dP ⊙ P) = rowsum(dO ⊙ O)"),
               ("dQ", "dQ = scale · dS K"),
               ("dK", "dK = scale · dSᵀ Q"),
               ("dV", "dV = Pᵀ dO"))

    @staticmethod
    def forward(ctx, q, k, v, keep, bias, *, scale, is_causal):
        xp = ctx.xp
        if is_causal:
            keep = combine_keep(keep, causal_keep(xp, slice(0, q.shape[-2]), slice(0, k.shape[-2])))
        scores = (q * scale) @ xp.swapaxes(k, -1, -2)                     # (..., Tq, Tk)
        probs, _, _ = masked_softmax(xp, scores, keep, bias, -1, scratch=True)  # in place of S
        out = probs @ v                                                 # (..., Tq, Dv)
        ctx.save(q=q, k=k, v=v, probs=probs, out=out, keep=keep, bias=bias)  # masks: to redraw S
        return out

    @staticmethod
    def backward(ctx, grad):
        """dV = Pᵀ dO; dP = dO Vᵀ; softmax's backward row by row gives dS = P ⊙ (dP − D) with
        D = rowsum(dP ⊙ P), which equals rowsum(dO ⊙ O) since O = P V (a (Tq, Dv) product instead
        of a (Tq, Tk) one); S = scale · Q Kᵀ gives dQ = scale · dS K and dK = scale · dSᵀ Q.
        dP and dS are only computed when dQ or dK is asked for, in one array, in place; dQ needs
        no Q and dK no K.
        Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
        """
        xp = ctx.xp
        need_q, need_k, need_v = ctx.needs_grad[:3]
        probs = ctx.saved["probs"]
        shown = {"P": probs}
        grad_q = grad_k = grad_v = None
        if need_v:
            grad_v = shown["dV"] = xp.swapaxes(probs, -1, -2) @ grad                  # (..., Tk, Dv)
        if need_q or need_k:
            grad_p = grad @ xp.swapaxes(ctx.saved["v"], -1, -2)                     # (..., Tq, Tk)
            if ctx.trace is not None:
                shown["dP"] = grad_p.copy()
            grad_p -= sum_keepdims(xp, grad * ctx.saved["out"])                       # dP − D
            grad_s = shown["dS"] = xp.multiply(grad_p, probs, out=grad_p)             # (..., Tq, Tk)
            if need_q:
                grad_q = shown["dQ"] = (grad_s @ ctx.saved["k"]) * ctx.scale           # (..., Tq, Dk)
            if need_k:
                grad_k = shown["dK"] = (xp.swapaxes(grad_s, -1, -2) @ ctx.saved["q"]) * ctx.scale
        if ctx.trace is not None:       # the stepper is watching: show the insides computed
            q, k = ctx.saved["q"], ctx.saved["k"]
            shown["S"] = masked_logits(xp, (q * ctx.scale) @ xp.swapaxes(k, -1, -2), ctx.saved["keep"],
                                       ctx.saved["bias"])
            ctx.trace.update(shown)
        return grad_q, grad_k, grad_v, None, None
