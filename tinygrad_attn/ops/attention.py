"""Scaled dot-product attention as one op with its own dQ, dK, dV.

O = softmax(scale · Q Kᵀ, mask) V over the last two axes, batch axes broadcast. The masking
rule is softmax's (``masked_softmax``): True takes part, a float mask is added, masked weights
are exactly 0, a fully masked row gives a zero output.
"""

from __future__ import annotations

import numpy as np

from . import register
from .base import Case, Op
from .softmax import masked_logits, masked_softmax

FORMULA = ("dQ = scale · dS K,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),  dP = dO Vᵀ",
           "dK = scale · dSᵀ Q", "dV = Pᵀ dO", "mask: not differentiable", "float mask: not differentiable")
# What a traced backward shows, in the order it computes them (S and P come from forward).
INSIDES = (("S", "S = scale · Q Kᵀ (+ float mask; −inf where masked)"),
           ("P", "P = softmax(S) row by row"),
           ("dP", "dP = dO Vᵀ"),
           ("dS", "dS = P ⊙ (dP − rowsum(dP ⊙ P))"),
           ("dQ", "dQ = scale · dS K"),
           ("dK", "dK = scale · dSᵀ Q"),
           ("dV", "dV = Pᵀ dO"))

_PADDED = np.array([[True, True, True, False, False]])
_ROW_MASKED = np.array([[True, False, True, True, False], [False] * 5, [True] * 5, [True] * 5])
_FLOAT_ROW_MASKED = np.array([[0.0, 0.0, 0.0], [-np.inf] * 3, [1.0, -np.inf, -0.5], [0.0] * 3, [0.3] * 3])
# Plain; causal; n_q < n_k with a fully masked row; broadcast batch axes with padding, a float
# mask and causal; n_q > n_k causal with a float mask whose row 1 is all −inf.
CASES = (Case((3, 4), (3, 4), (3, 2), None, None, params={"scale": 0.5, "is_causal": False}),
         Case((5, 3), (5, 3), (5, 2), None, None, params={"scale": 0.6, "is_causal": True}),
         Case((4, 3), (5, 3), (5, 2), _ROW_MASKED, None, params={"scale": 0.6, "is_causal": False}),
         Case((2, 3, 3), (1, 5, 3), (2, 5, 4), _PADDED, np.array([[0.5, -1.0, 0.0, 2.0, 0.1]]),
              params={"scale": 0.4, "is_causal": True}),
         Case((5, 3), (3, 3), (3, 2), None, _FLOAT_ROW_MASKED, params={"scale": 0.7, "is_causal": True}))


def causal_keep(xp, rows: slice, cols: slice):
    """Booleans (rows, cols) for query rows × key columns: query i sees key j when j ≤ i.

    Queries and keys are aligned top-left (as in PyTorch), also when n_q ≠ n_k: with more keys
    than queries the last keys are seen by nobody; with more queries, the late ones see every key.
    """
    return xp.arange(rows.start, rows.stop)[:, None] >= xp.arange(cols.start, cols.stop)[None, :]


def combine_keep(keep, causal):
    """The user's keep mask (or None) and the causal one: a position takes part if both allow it."""
    return causal if keep is None else keep & causal


@register
class ScaledDotProductAttention(Op):
    """O = P V with P = softmax(S, mask), S = scale · Q Kᵀ; holds the whole (Tq, Tk) matrix P."""

    name = "scaled_dot_product_attention"
    formula = FORMULA
    cases = CASES
    insides = INSIDES

    @staticmethod
    def forward(ctx, q, k, v, keep, bias, *, scale, is_causal):
        xp = ctx.xp
        if is_causal:
            keep = combine_keep(keep, causal_keep(xp, slice(0, q.shape[-2]), slice(0, k.shape[-2])))
        scores = (q @ xp.swapaxes(k, -1, -2)) * scale                    # (..., Tq, Tk)
        probs, _, _ = masked_softmax(xp, scores, keep, bias, -1)        # (..., Tq, Tk)
        ctx.save(q=q, k=k, v=v, probs=probs, keep=keep, bias=bias)    # masks: a traced backward redraws S
        return probs @ v                                                # (..., Tq, Dv)

    @staticmethod
    def backward(ctx, grad):
        """dV = Pᵀ dO; dP = dO Vᵀ; softmax's backward row by row gives dS = P ⊙ (dP − rowsum(dP ⊙ P));
        S = scale · Q Kᵀ gives dQ = scale · dS K and dK = scale · dSᵀ Q.
        Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
        """
        xp = ctx.xp
        q, k, v, probs = (ctx.saved[n] for n in ("q", "k", "v", "probs"))
        grad_p = grad @ xp.swapaxes(v, -1, -2)                          # (..., Tq, Tk)
        grad_s = probs * (grad_p - (grad_p * probs).sum(axis=-1, keepdims=True))
        grad_q = (grad_s @ k) * ctx.scale                               # (..., Tq, Dk)
        grad_k = (xp.swapaxes(grad_s, -1, -2) @ q) * ctx.scale          # (..., Tk, Dk)
        grad_v = xp.swapaxes(probs, -1, -2) @ grad                      # (..., Tk, Dv)
        if ctx.trace is not None:       # the stepper is watching: show the insides
            scores = masked_logits(xp, (q @ xp.swapaxes(k, -1, -2)) * ctx.scale, ctx.saved["keep"],
                                   ctx.saved["bias"])
            ctx.trace.update(S=scores, P=probs, dP=grad_p, dS=grad_s, dQ=grad_q, dK=grad_k, dV=grad_v)
        return grad_q, grad_k, grad_v, None, None
