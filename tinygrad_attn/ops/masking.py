"""The masking rule that softmax, log-softmax, cross-entropy, attention and flash attention share.

A boolean ``keep`` marks the positions that take part (True); a float ``bias`` is added to the
logits. Masked positions get probability 0 and gradient 0; a fully masked row outputs zeros,
never NaN. ``is_causal`` is one more keep mask (query i sees key j when j ≤ i), combined with
the user's by "and".
"""

from __future__ import annotations

from typing import Any

from .reduce import sum_keepdims


def masked_logits(xp: Any, x: Any, keep: Any, bias: Any, scratch: bool = False) -> Any:
    """z = x + bias, with −inf where keep is False (either may be None).

    With `scratch` the caller owns `x` and lets it be overwritten: attention's score matrix is
    masked in place instead of copied, which saves one (…, Tq, Tk) array.
    """
    z = x + bias if bias is not None else x if scratch else None
    if keep is None:
        return x if z is None else z
    if z is None:
        return xp.where(keep, x, xp.asarray(-xp.inf, dtype=x.dtype))
    xp.copyto(z, xp.asarray(-xp.inf, dtype=z.dtype), where=~keep)
    return z


def masked_softmax(xp: Any, x: Any, keep: Any, bias: Any, axis: int,
                   scratch: bool = False) -> tuple[Any, Any, Any]:
    """Softmax of the masked logits along `axis`: (probs, row max m, row sum s of exp(z − m)).

    m and s keep `axis` with size 1; `s > 0` exactly on the rows where some position takes part,
    and log-softmax is z − m − log s there.

    The row maximum is subtracted before exp (softmax(z) = softmax(z − m) for any constant m, and
    with m = max z every exp is ≤ 1, so ±1e4 logits stay finite). A row with no position taking
    part has m = −inf; m is replaced by 0 there so that exp(−inf − 0) = 0 and the row is zeros.
    A NaN (or +inf) in a row makes s NaN and so the whole row NaN, as in PyTorch. An empty axis
    gives an empty result (m = s = 0). With `scratch`, `x` may be overwritten (see masked_logits).
    Apart from z, every (…, Tq, Tk) step runs in place on one fresh array.
    """
    z = masked_logits(xp, x, keep, bias, scratch)
    if z.shape[axis] == 0:
        # max() of nothing is undefined; the sum of nothing is 0, shaped as m and s must be.
        stat = z.sum(axis=axis, keepdims=True)
        return xp.exp(z), stat, stat
    m = z.max(axis=axis, keepdims=True)
    m = xp.where(m == -xp.inf, xp.asarray(0, dtype=m.dtype), m)
    e = xp.subtract(z, m, out=z if z is not x or scratch else None)
    xp.exp(e, out=e)
    s = sum_keepdims(xp, e, axis)
    e /= xp.where(s == 0, xp.asarray(1, dtype=s.dtype), s)
    return e, m, s


def causal_keep(xp: Any, rows: slice, cols: slice) -> Any:
    """Booleans (rows, cols) for query rows × key columns: query i sees key j when j ≤ i.

    Queries and keys are aligned top-left (as in PyTorch), also when n_q ≠ n_k: with more keys
    than queries the last keys are seen by nobody; with more queries, the late ones see every key.
    """
    return xp.arange(rows.start, rows.stop)[:, None] >= xp.arange(cols.start, cols.stop)[None, :]


def combine_keep(keep: Any, causal: Any) -> Any:
    """The user's keep mask (or None) and the causal one: a position takes part if both allow it."""
    return causal if keep is None else keep & causal
