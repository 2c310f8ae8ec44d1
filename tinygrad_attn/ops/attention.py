"""Scaled dot-product attention as one op with its own dQ, dK, dV.

O = softmax(scale · Q Kᵀ, mask) V over the last two axes, batch axes broadcast. The masking
rule is softmax's (``masking.py``): True takes part, a float mask is added, masked weights
are exactly 0, a fully masked row gives a zero output.

Grouped-query attention reaches the op as broadcast batch axes: q (…, Hkv, G, Tq, D) and k, v
(…, Hkv, 1, Tk, D), each kv head shared by G query heads. dK and dV come out per query head and the
engine sums each group, as it undoes any broadcast. ``kernels/attention.py`` computes the same
numbers in less memory and time.
"""

from __future__ import annotations

import numpy as np

from .base import Case, Op
from .masking import causal_keep, combine_keep, masked_logits
from .registry import register
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
        S = scale * (q @ xp.swapaxes(k, -1, -2))                                  # (..., Tq, Tk)
        S = masked_logits(xp, S, keep, None if bias is None else bias.astype(S.dtype))  # in S's dtype
        P, _, _ = softmax_parts(xp, S, -1)                                        # (..., Tq, Tk)
        O = P @ v                                                                 # (..., Tq, Dv)
        ctx.save(q=q, k=k, v=v, probs=P, out=O, keep=keep, bias=bias)   # the masks: to show S
        return O

    @staticmethod
    def backward(ctx, grad):
        """dV = Pᵀ dO; dP = dO Vᵀ; softmax's backward row by row gives dS = P ⊙ (dP − D) with
        D = rowsum(dP ⊙ P), which equals rowsum(dO ⊙ O) since O = P V; S = scale · Q Kᵀ gives
        dQ = scale · dS K and dK = scale · dSᵀ Q. A kv head shared by a group of query heads (a
        broadcast batch axis) gets its group's sum from the engine.
        Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
        """
        xp, dO, P = ctx.xp, grad, ctx.saved["probs"]
        need_q, need_k, need_v = ctx.needs_grad[:3]
        insides = {"P": P}
        if need_v:
            insides["dV"] = xp.swapaxes(P, -1, -2) @ dO                 # (..., Tk, Dv)
        if need_q or need_k:                                            # dP and dS feed dQ and dK
            V, O = ctx.saved["v"], ctx.saved["out"]
            dP = dO @ xp.swapaxes(V, -1, -2)                            # (..., Tq, Tk)
            D = (dO * O).sum(axis=-1, keepdims=True)                    # (..., Tq, 1)
            dS = P * (dP - D)                                           # (..., Tq, Tk)
            insides.update(dP=dP, D=D, dS=dS)
            if need_q:
                insides["dQ"] = ctx.scale * (dS @ ctx.saved["k"])       # (..., Tq, Dk)
            if need_k:
                insides["dK"] = ctx.scale * (xp.swapaxes(dS, -1, -2) @ ctx.saved["q"])   # (..., Tk, Dk)
        if ctx.trace is not None:       # the stepper is watching: S too, recomputed
            Q, K = ctx.saved["q"], ctx.saved["k"]
            S = masked_logits(xp, ctx.scale * (Q @ xp.swapaxes(K, -1, -2)), ctx.saved["keep"],
                              ctx.saved["bias"])
            ctx.trace.update(S=S, **insides)
        return insides.get("dQ"), insides.get("dK"), insides.get("dV"), None, None
