"""Reductions over a row, made fast: ``rowsum`` and ``colsum`` as products with a vector of ones
(BLAS runs them faster than NumPy's reductions at a transformer's sizes, with the same float32
accuracy), ``row_max`` through a transposed copy, and ``softmax_parts`` built on them (what the
softmax, log-softmax, cross-entropy and attention kernels share).

Each computes what its textbook form computes (``x.sum(-1, keepdims=True)``, ``ops.softmax.
softmax_parts``); the sums may differ in their last bits, since BLAS adds in another order.
``benchmarks/README.md`` has the figures ("Kernels").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import ones

__all__ = ["colsum", "row_max", "rowsum", "softmax_parts"]

_HALF = np.dtype(np.float16)    # NumPy's dtypes are singletons: `is` is a pointer test


def rowsum(xp: Any, x: Any) -> Any:
    """Σⱼ x[..., j], shaped (..., 1): x · 1 (float16 accumulated in float32)."""
    if x.dtype is _HALF:
        return rowsum(xp, x.astype(np.float32)).astype(np.float16)
    if x.dtype.kind != "f":
        return x.sum(axis=-1, keepdims=True)
    return (x @ ones(xp, x.shape[-1], x.dtype))[..., None]


def colsum(xp: Any, x: Any) -> Any:
    """Σᵢ x[i, :] of a matrix x (r, k), shaped (k,): 1ᵀ x from 64 rows (NumPy's sum below that,
    where the product's call costs more than it saves); float16 accumulated in float32."""
    if x.dtype is _HALF:
        return colsum(xp, x.astype(np.float32)).astype(np.float16)
    if x.dtype.kind != "f" or x.shape[0] < 64:
        return x.sum(axis=0)
    return ones(xp, x.shape[0], x.dtype) @ x


def row_max(xp: Any, z: Any) -> Any:
    """max over the last axis, kept as a size-1 column: the same values as ``z.max(-1, keepdims=True)``.

    NumPy reduces a short last axis one short loop per row, slowly. For many rows (at least 32,
    and twice k) of at most k = 64, a transformer's attention rows and a small vocabulary's
    logits, the rows are copied as the columns of a matrix (k, rows) instead, whose maximum down
    the columns is k long vectorised passes; fewer or longer rows keep NumPy's max. NaN and −inf
    propagate as in max.
    """
    k = z.shape[-1]
    if xp is not np or k > 64 or z.size < max(32, 2 * k) * max(k, 1):     # k = 0 too
        return z.max(axis=-1, keepdims=True)
    columns = xp.ascontiguousarray(z.reshape(-1, k).T)      # (k, rows): row i is column i of z
    return columns.max(axis=0).reshape(z.shape[:-1] + (1,))


def softmax_parts(xp: Any, z: Any, axis: int, *, overwrite: bool = False) -> tuple[Any, Any, Any]:
    """``ops.softmax.softmax_parts`` (probs, row max m, row sum s), the same numbers made with
    ``row_max`` and ``rowsum`` along the last axis, and in place: with `overwrite` the caller gives
    z up and the probabilities are computed in its memory (no second array of z's size)."""
    if z.shape[axis] == 0:
        stat = z.sum(axis=axis, keepdims=True)
        return xp.exp(z), stat, stat
    last = axis in (-1, z.ndim - 1)
    m = row_max(xp, z) if last else z.max(axis=axis, keepdims=True)
    m = xp.maximum(m, xp.finfo(m.dtype).min)            # −inf (no position) → the lowest float
    e = xp.subtract(z, m, out=z if overwrite else None)
    xp.exp(e, out=e)
    s = rowsum(xp, e) if last else e.sum(axis=axis, keepdims=True)
    e /= xp.maximum(s, 1)       # s ≥ 1 (the max's own term is 1) unless no position: 0, kept 0
    return e, m, s
