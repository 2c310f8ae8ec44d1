"""Flash attention made fast: a key block meets only the query rows that can see some of its keys,
in tiles of at most ``_TILE_ROWS`` rows, and the batch is cut among threads (``parallel``).

With ``is_causal``, a key block starting at column c is only paired with the query rows i ≥ c:
the tiles above the diagonal are skipped, and so is the masked top right quarter of each block's
diagonal square (see ``_tiles``). With a sliding window w as well, only the rows
i < c + block + w − 1 see the block: the tiles below the window are skipped too, so the work grows
as n · (w + block), not n². The sums run in another order than the textbook op's: a few ulps apart.
"""

from __future__ import annotations

import math

from ..guards.shapes import attention_shapes
from ..ops.flash import FlashAttention, mask_tile
from ..ops.masking import causal_keep, mask_scores_in_place
from .attention import group_summed_product, shared_batch
from .parallel import over_batch, piece
from .reductions import rowsum
from .registry import kernel

__all__ = ["TiledFlashAttention"]


# Query rows per tile: a key block meets its rows in pieces of this many, which keeps a tile at a
# few MiB (4 heads × 512 × 256 float32: 2 MiB) however long the sequence (benchmarks/README.md:
# how the size was chosen).
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
    scores = mask_scores_in_place(xp, scores, mask_tile(keep, rows, cols), mask_tile(bias, rows, cols))
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


@kernel("cpu", "cuda", ulps=64)
class TiledFlashAttention(FlashAttention):
    """Flash attention over the tiles that matter, the batch in pieces."""

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
            # product then updates both: exp(S_B − m) @ [V_B | 1] = [exp(S_B − m) V_B | rowsum].
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
        """The textbook formulas per tile (a key block against a piece of its query rows), into
        arrays made beforehand; the scale multiplies dQ and dK once, after their sums."""
        xp = ctx.xp
        need_q, need_k, need_v = ctx.needs_grad[:3]
        q, k, v, keep, bias, lse = (ctx.saved[n] for n in ("q", "k", "v", "keep", "bias", "lse"))
        q_scaled, (batch, n_q, n_k) = _scaled_queries(ctx, q, k, v)
        need_s = need_q or need_k                                       # dS feeds dQ and dK only
        # A kv head shared by a group of query heads gets the group's sum (group_summed_product).
        dQ, dK, dV = (xp.zeros(shape + x.shape[-2:], dtype=grad.dtype) if need else None
                      for x, shape, need in ((q, batch, need_q), (k, shared_batch(batch, k.shape), need_k),
                                             (v, shared_batch(batch, v.shape), need_v)))
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
                P -= lse_[..., rows, :]
                xp.exp(P, out=P)                                        # P_B, as in forward
                dO = grad_[..., rows, :]
                if need_v:
                    dV_[..., cols, :] += group_summed_product(xp, P, dO, v.shape)
                if need_s:
                    dS = dO @ xp.swapaxes(v_[..., cols, :], -1, -2)     # dP_B, then in place:
                    dS -= D_[..., rows, :]
                    dS *= P                                             # dS_B = P_B ⊙ (dP_B − D)
                    if need_q:
                        dQ_[..., rows, :] += dS @ k_[..., cols, :]
                    if need_k:
                        dK_[..., cols, :] += group_summed_product(xp, dS, q_[..., rows, :], k.shape)
                    del dS
                del P                         # freed before the next tiles are made, not after

        # A kv head shared by a group sums the group: that axis is never cut.
        summed = shared_batch(batch, k.shape) != batch or shared_batch(batch, v.shape) != batch
        over_batch(gradients, batch, _work(batch, tiles, keep, bias), xp=xp,
                   fixed=len(batch) - 1 if summed else None)
        for d in (dQ, dK):                                             # S = scale · Q Kᵀ
            if d is not None:
                d *= ctx.scale
        return dQ, dK, dV, None, None
