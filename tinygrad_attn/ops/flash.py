"""Flash attention: the same result as ``scaled_dot_product_attention``, computed in key blocks.

Forward walks the keys in blocks of ``block_size`` with an online softmax (a running row maximum
m and running sum l, rescaling what was accumulated whenever m grows) and saves only the output
O and the row log-sum-exp L = m + log l. Backward recomputes each block's probabilities as
P = exp(S − L), exactly the forward's, so neither pass holds a (Tq, Tk) array. A key block meets
its query rows in pieces of at most ``_TILE_ROWS`` rows, so a tile is at most (_TILE_ROWS, block).
With ``is_causal``, a key block starting at column c is only paired with the query rows i ≥ c,
the rows that can see some of its keys: the tiles above the diagonal are skipped, and so is the
masked top right quarter of each block's diagonal square (see ``_tiles``). With a sliding window
w as well, only the rows i < c + block + w − 1 see the block: the tiles below the window are
skipped too, so the work grows as n · (w + block), not n².
"""

from __future__ import annotations

import math

import numpy as np

from ..guards.shapes import attention_shapes
from ..kernels.parallel import over_batch, piece
from ..kernels.reductions import rowsum
from .attention import group_summed_product, shared_batch
from .base import Case, Op
from .masking import causal_keep, mask_scores_in_place
from .registry import register

__all__ = ["FlashAttention"]


_PADDED = np.array([[True, True, True, True, False, False]])          # (1, Tk): keys 4, 5 are padding
_FIRST_OFF = np.array([[False, False, True, True, True]])             # (1, Tk): block 0 wholly masked
_QUERY_OFF = np.array([[True], [False], [True], [True]])              # (Tq, 1): query 1 sees no key
_FLOAT_ROW_MASKED = np.array([[0.0, 0.5, -1.0]] * 6)
_FLOAT_ROW_MASKED[1] = -np.inf                                        # query 1: every key −inf


def _params(scale: float, is_causal: bool, block_size: int, window: int | None = None) -> dict:
    return {"scale": scale, "is_causal": is_causal, "block_size": block_size, "window": window}


def _tile(mask, rows: slice, cols: slice):
    """The (rows, cols) piece of a keep or bias mask that broadcasts to (..., Tq, Tk), or None."""
    if mask is None:
        return None
    if mask.ndim >= 2 and mask.shape[-2] != 1:
        mask = mask[..., rows, :]
    return mask if mask.shape[-1] == 1 else mask[..., cols]


# Query rows per tile: a key block meets its rows in pieces of this many, which keeps a tile at a
# few MiB (4 heads × 512 × 256 float32: 2 MiB) however long the sequence. In our benchmark (causal,
# n = 2048, 4 heads, block 256) 384 to 1024 rows were equally fast; 256 rows, or all of Tq, slower.
_TILE_ROWS = 512


def _tiles(ctx, n_q: int, n_k: int) -> list[tuple[slice, slice]]:
    """(query rows, key columns) per tile: each key block against its query rows, cut in pieces of
    at most _TILE_ROWS rows.

    With is_causal a block whose first key is c meets only the rows i ≥ c, and a tile's keys stop
    after its last row (query i sees keys j ≤ i: later keys are masked for every row of the tile).
    The first piece is the top half of the block's diagonal square, rows c … c + block/2 − 1, so
    it stops at key c + block/2 − 1: a quarter of the square, masked, is never computed.
    With a window w, the block's last key (stop − 1) leaves the window of every row from
    stop − 1 + w on: the block's rows end there.
    docs/flash_attention.md draws the tiles ("The tiles, drawn").
    """
    tiles = []
    for start in range(0, min(n_k, n_q) if ctx.is_causal else n_k, ctx.block_size):
        stop = min(start + ctx.block_size, n_k)
        end = n_q if ctx.window is None else min(n_q, stop - 1 + ctx.window)
        if ctx.is_causal:
            tops = [start, *range(min(start + max(ctx.block_size // 2, 1), end), end, _TILE_ROWS)]
        else:
            tops = list(range(0, n_q, _TILE_ROWS))
        for top, bottom in zip(tops, [*tops[1:], end]):
            tiles.append((slice(top, bottom), slice(start, min(stop, bottom) if ctx.is_causal else stop)))
    return tiles


def _tile_scores(ctx, q_scaled, k, keep, bias, rows: slice, cols: slice):
    """A fresh array of the masked scores S[..., rows, cols] = (scale · Q) Kᵀ (the caller may overwrite it).

    A causal tile starts on or below the diagonal (rows.start ≥ cols.start). Only its rows
    i < cols.stop, on the block's diagonal square, see part of the block (keys j ≤ i); the rows
    below see all of it. So the causal mask is set, in place, on those rows alone. With a window
    the rows from cols.start + w on lose keys at the other end: the tile is masked whole then.
    """
    xp = ctx.xp
    scores = q_scaled[..., rows, :] @ xp.swapaxes(k[..., cols, :], -1, -2)
    scores = mask_scores_in_place(xp, scores, _tile(keep, rows, cols), _tile(bias, rows, cols))
    if ctx.window is not None and rows.stop > cols.start + ctx.window:
        mask_scores_in_place(xp, scores, causal_keep(xp, rows, cols, ctx.window), None)
    elif ctx.is_causal and rows.start < cols.stop:
        square = slice(rows.start, min(rows.stop, cols.stop))
        diagonal_rows = scores[..., :square.stop - rows.start, :]         # a view: masked in place
        mask_scores_in_place(xp, diagonal_rows, causal_keep(xp, square, cols), None)
    return scores


def _work(batch: tuple[int, ...], tiles: list[tuple[slice, slice]], keep, bias) -> int:
    """Score elements the tiles compute (what ``over_batch`` weighs); 0, so never split, when a
    mask has batch axes beyond the inputs'."""
    if any(m is not None and m.ndim - 2 > len(batch) for m in (keep, bias)):
        return 0
    return math.prod(batch) * sum((r.stop - r.start) * (c.stop - c.start) for r, c in tiles)


def _scaled_queries(ctx, q, k, v):
    """scale · Q in Q's dtype, broadcast to every batch axis (so each score tile has the output's
    batch shape), and the sizes (batch, n_q, n_k). Scaling Q once costs n_q × d; scaling every
    score tile would cost n_q × n_k."""
    shapes = attention_shapes("flash_attention", q.shape, k.shape, v.shape)
    q_scaled = q * ctx.xp.asarray(ctx.scale, dtype=q.dtype)
    return ctx.xp.broadcast_to(q_scaled, shapes.batch + q.shape[-2:]), shapes


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
               ("dP", "dP = dO Vᵀ, block by block (not computed on the causal tiles skipped)"),
               ("dS", "dS = P ⊙ (dP − D)"),
               ("dQ", "dQ = scale · Σ_B dS_B K_B"),
               ("dK", "dK = scale · dSᵀ Q"),
               ("dV", "dV = Pᵀ dO"))

    @staticmethod
    def forward(ctx, q, k, v, keep, bias, *, scale, is_causal, block_size, window=None):
        xp = ctx.xp
        q_scaled, (batch, n_q, n_k) = _scaled_queries(ctx, q, k, v)
        out = xp.empty(batch + (n_q, v.shape[-1]), dtype=q.dtype)
        lse = xp.empty(batch + (n_q, 1), dtype=q.dtype)
        tiles = _tiles(ctx, n_q, n_k)

        def attend(i):          # the batch piece i (all of it with one thread: parallel.py)
            q_, k_, v_, keep_, bias_ = (piece(x, i, len(batch)) for x in (q_scaled, k, v, keep, bias))
            part = q_.shape[:-2]
            # The docs' running values per query row: m, the largest score so far; l = Σ exp(s − m);
            # a = Σ exp(s − m) v. a and l sit side by side in one array, acc = [a | l], because one
            # product then updates both: exp(S_B − m) @ [V_B | 1] = [exp(S_B − m) V_B | rowsum]. On a
            # full tile (4 heads, 512 rows, 256 keys, d 64, float32) that saves 17-45 µs of ~0.95 ms
            # (2-5%) against a += e @ V_B and l += rowsum e done apart.
            v_one = xp.concatenate([v_, xp.ones(v_.shape[:-1] + (1,), dtype=v.dtype)], axis=-1)
            acc = xp.zeros(part + (n_q, v.shape[-1] + 1), dtype=q.dtype)
            a, l = acc[..., :-1], acc[..., -1:]                         # views: (..., Tq, Dv), (..., Tq, 1)
            m = xp.full(part + (n_q, 1), -xp.inf, dtype=q.dtype)
            zero = xp.asarray(0, dtype=q.dtype)
            for rows, cols in tiles:
                e = _tile_scores(ctx, q_, k_, keep_, bias_, rows, cols)  # S_B: (..., R, B)
                m_old = m[..., rows, :]
                m_new = xp.maximum(m_old, e.max(axis=-1, keepdims=True))
                shift = xp.where(m_new == -xp.inf, zero, m_new)         # nothing seen yet: 0
                e -= shift
                xp.exp(e, out=e)                                        # in place: no 2nd tile
                acc[..., rows, :] *= xp.exp(m_old - shift)              # a and l, to the new max
                acc[..., rows, :] += e @ v_one[..., cols, :]            # + [e V_B | rowsum e]
                m[..., rows, :] = m_new
                del e                         # freed before the next tile is made, not after
            alive = l != 0                              # some key takes part (a NaN row stays NaN)
            safe_l = xp.where(alive, l, 1)
            xp.divide(a, safe_l, out=out[i])
            lse[i] = xp.where(alive, m + xp.log(safe_l), xp.inf)        # +inf: exp(S − L) = 0

        over_batch(attend, batch, _work(batch, tiles, keep, bias), xp=xp)
        ctx.save(q=q, k=k, v=v, keep=keep, bias=bias, out=out, lse=lse)
        return out

    @staticmethod
    def backward(ctx, grad):
        """Per tile (a key block B against a piece of its query rows): P = exp(S − L) (L = +inf on
        a fully masked row makes P = 0), then the plain kernel's formulas; dK_B and dV_B are sums
        over the pieces, dQ over the key blocks, and the scale multiplies dQ and dK once, after
        their sums. D = rowsum(dP ⊙ P) = rowsum(dO ⊙ O) is computed once up front.
        Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros, never NaN.
        """
        xp = ctx.xp
        need_q, need_k, need_v = ctx.needs_grad[:3]
        q, k, v, keep, bias, lse = (ctx.saved[n] for n in ("q", "k", "v", "keep", "bias", "lse"))
        q_scaled, (batch, n_q, n_k) = _scaled_queries(ctx, q, k, v)
        need_s = need_q or need_k                                       # dS feeds dQ and dK only
        # A kv head shared by a group of query heads gets the group's sum (group_summed_product).
        dQ, dK, dV = (xp.zeros(shape + x.shape[-2:], dtype=grad.dtype) if need else None
                      for x, shape, need in ((q, batch, need_q), (k, shared_batch(batch, k.shape), need_k),
                                             (v, shared_batch(batch, v.shape), need_v)))
        shown = None if ctx.trace is None else _Insides(xp, batch + (n_q, n_k), grad.dtype, need_s)
        tiles = _tiles(ctx, n_q, n_k)
        D = xp.empty(batch + (n_q, 1), dtype=grad.dtype) if need_s else None   # (..., Tq, 1)

        def gradients(i):       # the batch piece i (all of it with one thread: parallel.py)
            q_s, q_, k_, v_, keep_, bias_, lse_, grad_, out_ = (
                piece(x, i, len(batch)) for x in (q_scaled, q, k, v, keep, bias, lse, grad, ctx.saved["out"]))
            dQ_, dK_, dV_ = (None if d is None else d[i] for d in (dQ, dK, dV))   # views: written in place
            if need_s:
                D[i] = rowsum(xp, grad_ * out_)
            D_ = None if D is None else D[i]
            for rows, cols in tiles:
                P = _tile_scores(ctx, q_s, k_, keep_, bias_, rows, cols)  # S_B: (..., R, B)
                if shown is not None:
                    shown.put("S", rows, cols, P)
                P -= lse_[..., rows, :]
                xp.exp(P, out=P)                                        # P_B, as in forward
                dO = grad_[..., rows, :]
                if need_v:
                    dV_[..., cols, :] += group_summed_product(xp, P, dO, v.shape)
                if shown is not None:
                    shown.put("P", rows, cols, P)
                if need_s:
                    dS = dO @ xp.swapaxes(v_[..., cols, :], -1, -2)     # dP_B, then in place:
                    if shown is not None:
                        shown.put("dP", rows, cols, dS)
                    dS -= D_[..., rows, :]
                    dS *= P                                             # dS_B = P_B ⊙ (dP_B − D)
                    if shown is not None:
                        shown.put("dS", rows, cols, dS)
                    if need_q:
                        dQ_[..., rows, :] += dS @ k_[..., cols, :]
                    if need_k:
                        dK_[..., cols, :] += group_summed_product(xp, dS, q_[..., rows, :], k.shape)
                    del dS
                del P                         # freed before the next tiles are made, not after

        # A kv head shared by a group sums the group: that axis is never cut.
        summed = shared_batch(batch, k.shape) != batch or shared_batch(batch, v.shape) != batch
        over_batch(gradients, batch, 0 if shown is not None else _work(batch, tiles, keep, bias), xp=xp,
                   fixed=len(batch) - 1 if summed else None)
        for d in (dQ, dK):                                             # S = scale · Q Kᵀ
            if d is not None:
                d *= ctx.scale
        if shown is not None:
            computed = {"D": D, "dQ": dQ, "dK": dK, "dV": dV}
            ctx.trace.update(L=lse, **shown.matrices, **{n: x for n, x in computed.items() if x is not None})
        return dQ, dK, dV, None, None


class _Insides:
    """The whole (..., Tq, Tk) matrices S, P, dP, dS, filled tile by tile, for a traced backward
    only. Tiles the causal walk skips are wholly masked: S = −inf, P = dS = 0 there, and dP,
    which flash never computes there, is NaN (shown as "not computed")."""

    def __init__(self, xp, shape: tuple[int, ...], dtype, with_ds: bool):
        self.matrices = {"S": xp.full(shape, -xp.inf, dtype=dtype), "P": xp.zeros(shape, dtype=dtype)}
        if with_ds:                     # dP and dS exist only when dQ or dK is asked for
            self.matrices.update(dP=xp.full(shape, xp.nan, dtype=dtype), dS=xp.zeros(shape, dtype=dtype))

    def put(self, name: str, rows: slice, cols: slice, tile) -> None:
        self.matrices[name][..., rows, cols] = tile
