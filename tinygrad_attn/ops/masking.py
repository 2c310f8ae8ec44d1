"""The masking rule that softmax, log-softmax, attention and flash attention share.

A boolean ``keep`` marks the positions that take part (True); a float ``bias`` is added to the
logits. Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros,
never NaN. ``is_causal`` is one more keep mask (query i sees key j when j ≤ i; with a sliding
window w, only when i − w < j ≤ i), combined with the user's by "and".
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["causal_keep", "combine_keep", "mask_scores_in_place", "masked_logits"]


def masked_logits(xp: Any, x: Any, keep: Any, bias: Any) -> Any:
    """z = x + bias, with −inf where keep is False (either may be None; `x` is never written)."""
    z = x if bias is None else x + bias
    if keep is None:
        return z
    return xp.where(keep, z, xp.asarray(-xp.inf, dtype=z.dtype))


def mask_scores_in_place(xp: Any, scores: Any, keep: Any, bias: Any) -> Any:
    """The same rule written over `scores`, an array the attention kernel made and owns.

    Masking the score matrix where it lies saves a copy of a (…, Tq, Tk) array. Only when a mask
    has batch axes the scores lack (Q Kᵀ does not carry V's batch axes) is a larger array made.
    """
    shape = np.broadcast_shapes(scores.shape, *(m.shape for m in (keep, bias) if m is not None))
    if shape != scores.shape:
        scores = xp.broadcast_to(scores, shape).copy()
    if bias is not None:
        scores += bias
    if keep is not None:
        xp.copyto(scores, xp.asarray(-xp.inf, dtype=scores.dtype), where=~keep)
    return scores


def causal_keep(xp: Any, rows: slice, cols: slice, window: int | None = None) -> Any:
    """Booleans (rows, cols) for query rows × key columns: query i sees key j when j ≤ i, and
    with a `window` w only the keys i − w + 1 … i (a sliding window).

    Queries and keys are aligned top-left (as in PyTorch), also when n_q ≠ n_k: with more keys
    than queries the last keys are seen by nobody; with more queries, the late ones see every key.
    """
    query, key = xp.arange(rows.start, rows.stop)[:, None], xp.arange(cols.start, cols.stop)[None, :]
    if window is None:
        return query >= key             # one comparison: no (rows, cols) array of distances
    return (query >= key) & (query - key < window)


def combine_keep(keep: Any, causal: Any) -> Any:
    """The user's keep mask (or None) and the causal one: a position takes part if both allow it."""
    return causal if keep is None else keep & causal
