"""Flash attention: the same result as ``scaled_dot_product_attention``, computed in key blocks.

Forward walks the keys in blocks of ``block_size`` with an online softmax (a running row maximum
m and running sum l, rescaling what was accumulated whenever m grows) and saves only the output
O and the row log-sum-exp L = m + log l. Backward recomputes each block's probabilities as
P = exp(S − L), exactly the forward's, so neither pass holds a (Tq, Tk) array; D = rowsum(dO ⊙ O)
replaces softmax's rowsum(dP ⊙ P) (``docs/flash_attention.md`` derives both). Every block meets
every query row here; ``kernels/flash.py`` skips the blocks a causal mask or a window hides, cuts
long sequences into tiles and runs the batch on several threads.
"""

from __future__ import annotations

import numpy as np

from .base import Case, Op
from .masking import causal_keep, masked_logits
from .registry import register

__all__ = ["FlashAttention", "mask_tile"]


_PADDED = np.array([[True, True, True, True, False, False]])          # (1, Tk): keys 4, 5 are padding
_FIRST_OFF = np.array([[False, False, True, True, True]])             # (1, Tk): block 0 wholly masked
_QUERY_OFF = np.array([[True], [False], [True], [True]])              # (Tq, 1): query 1 sees no key
_FLOAT_ROW_MASKED = np.array([[0.0, 0.5, -1.0]] * 6)
_FLOAT_ROW_MASKED[1] = -np.inf                                        # query 1: every key −inf


def _params(scale: float, is_causal: bool, block_size: int, window: int | None = None) -> dict:
    return {"scale": scale, "is_causal": is_causal, "block_size": block_size, "window": window}


def mask_tile(mask, rows: slice, cols: slice):
    """The (rows, cols) piece of a keep or bias mask that broadcasts to (..., Tq, Tk), or None."""
    if mask is None:
        return None
    if mask.ndim >= 2 and mask.shape[-2] != 1:
        mask = mask[..., rows, :]
    return mask if mask.shape[-1] == 1 else mask[..., cols]


def _block_scores(ctx, q, k, keep, bias, cols: slice):
    """S_B = scale · Q K_Bᵀ for the keys `cols`, −inf where the masks or is_causal hide a key."""
    xp, rows = ctx.xp, slice(0, q.shape[-2])
    S = ctx.scale * (q @ xp.swapaxes(k[..., cols, :], -1, -2))
    bias = mask_tile(bias, rows, cols)
    S = masked_logits(xp, S, mask_tile(keep, rows, cols), None if bias is None else bias.astype(S.dtype))
    if ctx.is_causal:
        S = xp.where(causal_keep(xp, rows, cols, ctx.window), S, xp.asarray(-xp.inf, dtype=S.dtype))
    return S                                                            # (..., Tq, B)


def _batch(*arrays) -> tuple[int, ...]:
    """The broadcast batch shape of the inputs and masks (every axis before the last two)."""
    return np.broadcast_shapes(*(x.shape[:-2] for x in arrays if x is not None and x.ndim > 2))


@register
class FlashAttention(Op):
    """O = softmax(scale · Q Kᵀ, mask) V, key block by key block with an online softmax."""

    name = "flash_attention"
    formula = {
        "q": "per key block B: P_B = exp(S_B − L), dS_B = P_B ⊙ (dO V_Bᵀ − D), D = rowsum(dO ⊙ O);  "
             "dQ += scale · dS_B K_B",
        "k": "dK_B = scale · dS_Bᵀ Q",
        "v": "dV_B = P_Bᵀ dO",
        "keep": None,
        "bias": None,
    }
    residuals = {
        "q": "Q",
        "k": "K",
        "v": "V",
        "out": "O (the output)",
        "lse": "L (row log-sum-exp)",
        "keep": "the keep mask",
        "bias": "the float mask",
    }
    # Each case is about the tiling: a partial last block; causal tiles above the diagonal
    # skipped; with n_q < n_k a key block nobody sees is never visited; with n_q > n_k a query row
    # all −inf; broadcast batch axes and a wholly masked last block; a wholly masked first block
    # (the running max starts at −inf); a (Tq, 1) mask with one key per block; one block > n_k.
    cases = (Case((3, 4), (5, 4), (5, 2), None, None, params=_params(0.5, False, 2)),
             Case((5, 3), (5, 3), (5, 2), None, None, params=_params(0.6, True, 2)),
             Case((3, 2), (6, 2), (6, 3), None, None, params=_params(0.7, True, 2)),
             Case((6, 3), (3, 3), (3, 2), None, _FLOAT_ROW_MASKED, params=_params(0.7, True, 2)),
             Case((2, 4, 3), (1, 6, 3), (2, 6, 2), _PADDED, None, params=_params(0.4, False, 4)),
             Case((4, 3), (5, 3), (5, 2), _FIRST_OFF, np.array([[0.3, 0.0, -0.2, 1.0, 0.5]]),
                  params=_params(0.6, False, 2)),
             Case((4, 3), (5, 3), (5, 2), _QUERY_OFF, None, params=_params(0.6, False, 1)),
             Case((4, 3), (4, 3), (4, 2), None, np.array([[0.2, -0.4, 0.0, 0.9]]),
                  params=_params(0.5, True, 8)),
             # Grouped-query attention (groups of 2 with a window of 3 over blocks of 2; one group
             # of all 3 heads); a window of 1 whose only key is masked for query 2 (a row all masked).
             Case((1, 2, 2, 7, 3), (1, 2, 1, 7, 3), (1, 2, 1, 7, 2), None, None,
                  params=_params(0.5, True, 2, 3)),
             Case((1, 3, 4, 2), (1, 1, 5, 2), (1, 1, 5, 3), _FIRST_OFF, None, params=_params(0.6, False, 2)),
             Case((5, 3), (5, 3), (5, 2), np.array([[True, True, False, True, True]]), None,
                  params=_params(0.7, True, 2, 1)))
    insides = (("L", "L = m + log l, the row log-sum-exp forward saved (+inf on a fully masked row)"),
               ("D", "D = rowsum(dO ⊙ O) = rowsum(dP ⊙ P)"),
               ("S", "S = scale · Q Kᵀ, recomputed block by block (−inf where masked)"),
               ("P", "P = exp(S − L), block by block: the forward's softmax"),
               ("dP", "dP = dO Vᵀ, block by block"),
               ("dS", "dS = P ⊙ (dP − D)"),
               ("dQ", "dQ = scale · Σ_B dS_B K_B"),
               ("dK", "dK = scale · dSᵀ Q"),
               ("dV", "dV = Pᵀ dO"))

    @staticmethod
    def forward(ctx, q, k, v, keep, bias, *, scale, is_causal, block_size, window=None):
        xp, n_q, n_k = ctx.xp, q.shape[-2], k.shape[-2]
        batch = _batch(q, k, v, keep, bias)
        m = xp.full(batch + (n_q, 1), -xp.inf, dtype=q.dtype)      # the largest score so far
        l = xp.zeros(batch + (n_q, 1), dtype=q.dtype)              # Σ exp(s − m) so far
        a = xp.zeros(batch + (n_q, v.shape[-1]), dtype=q.dtype)    # Σ exp(s − m) v so far
        for start in range(0, n_k, block_size):
            cols = slice(start, min(start + block_size, n_k))
            S = _block_scores(ctx, q, k, keep, bias, cols)                  # (..., Tq, B)
            m_new = xp.maximum(m, S.max(axis=-1, keepdims=True))
            shift = xp.where(m_new == -xp.inf, xp.asarray(0, dtype=q.dtype), m_new)   # none seen yet
            P = xp.exp(S - shift)
            rescale = xp.exp(m - shift)                                     # what m grew by
            l = rescale * l + P.sum(axis=-1, keepdims=True)
            a = rescale * a + P @ v[..., cols, :]
            m = m_new
        alive = l != 0                              # some key takes part (a NaN row stays NaN)
        safe_l = xp.where(alive, l, xp.asarray(1, dtype=l.dtype))
        O = a / safe_l                                                      # (..., Tq, Dv)
        L = xp.where(alive, m + xp.log(safe_l), xp.asarray(xp.inf, dtype=l.dtype))   # +inf: P = 0
        ctx.save(q=q, k=k, v=v, keep=keep, bias=bias, out=O, lse=L)
        return O

    @staticmethod
    def backward(ctx, grad):
        """Per key block B: P_B = exp(S_B − L) (L = +inf on a fully masked row makes P = 0), then
        the plain attention's formulas: dV_B = P_Bᵀ dO, dP_B = dO V_Bᵀ, dS_B = P_B ⊙ (dP_B − D),
        dQ += scale · dS_B K_B, dK_B = scale · dS_Bᵀ Q, with D = rowsum(dO ⊙ O) made once.
        A kv head shared by a group of query heads gets its group's sum from the engine.
        Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
        """
        xp, dO = ctx.xp, grad
        need_q, need_k, need_v = ctx.needs_grad[:3]
        need_s = need_q or need_k                                           # dS feeds dQ and dK only
        Q, K, L = ctx.saved["q"], ctx.saved["k"], ctx.saved["lse"]
        batch, n_q, n_k = L.shape[:-2], Q.shape[-2], K.shape[-2]
        dQ, dK, dV = (xp.zeros(batch + x.shape[-2:], dtype=grad.dtype) if need else None
                      for x, need in ((Q, need_q), (K, need_k), (ctx.saved["v"], need_v)))
        D = (dO * ctx.saved["out"]).sum(axis=-1, keepdims=True) if need_s else None   # (..., Tq, 1)
        # The stepper is watching: the whole (..., Tq, Tk) matrices, filled block by block.
        names = ("S", "P", "dP", "dS") if need_s else ("S", "P")
        shown = None if ctx.trace is None else {
            name: xp.zeros(batch + (n_q, n_k), dtype=grad.dtype) for name in names}
        for start in range(0, n_k, ctx.block_size):
            cols = slice(start, min(start + ctx.block_size, n_k))
            S = _block_scores(ctx, Q, K, ctx.saved["keep"], ctx.saved["bias"], cols)   # (..., Tq, B)
            P = xp.exp(S - L)                                               # the forward's softmax
            blocks = {"S": S, "P": P}
            if need_v:
                dV[..., cols, :] = xp.swapaxes(P, -1, -2) @ dO
            if need_s:
                dP = dO @ xp.swapaxes(ctx.saved["v"][..., cols, :], -1, -2)    # (..., Tq, B)
                dS = P * (dP - D)
                blocks.update(dP=dP, dS=dS)
                if need_q:
                    dQ += ctx.scale * (dS @ K[..., cols, :])
                if need_k:
                    dK[..., cols, :] = ctx.scale * (xp.swapaxes(dS, -1, -2) @ Q)
            if shown is not None:
                for name, block in blocks.items():
                    shown[name][..., cols] = block
        if shown is not None:
            computed = {"L": L, "D": D, "dQ": dQ, "dK": dK, "dV": dV}
            ctx.trace.update(**{n: x for n, x in computed.items() if x is not None}, **shown)
        return dQ, dK, dV, None, None
