"""Catching in-place edits of the arrays that a backward pass will read.

NumPy cannot intercept a write such as ``x.data[0] = 5``, so the engine fingerprints, when it
records a node, each array that the op saved for backward and that a user can reach: an input's
or the output's ``.data``. Backward recomputes the fingerprints first and refuses to run a node
whose arrays changed (PyTorch's version-counter check, done by content).

The fingerprint of a NumPy array of up to 1 KiB is a copy of its bytes (exact, and cheaper than
any reduction at that size); of a larger or a CuPy array, the wrapping integer sum of its bit
patterns in its own width: any change to one element, even of one bit, NaN included, changes it.
The sum costs one read of the array, about 0.4 of an elementwise op on it, and on the GPU it
stays on the device until backward compares it. Limits: a large array edited in a way that keeps
the sum (two elements swapped) goes unseen; private residuals (softmax probabilities) are not
fingerprinted, as users do not hold them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_UNSIGNED = {n: np.dtype(f"uint{8 * n}") for n in (1, 2, 4, 8)}
_SMALL_BYTES = 1024


def fingerprint(array: Any) -> Any:
    """The bytes of a small NumPy array; else Σ of its bits as unsigned ints of its itemsize,
    modulo 2^(8·itemsize)."""
    if isinstance(array, np.ndarray) and array.nbytes <= _SMALL_BYTES:
        return array.tobytes()
    unsigned = _UNSIGNED[array.dtype.itemsize]
    return array.view(unsigned).sum(dtype=unsigned)


def watch(saved: dict, inputs: tuple, out: Any) -> tuple[tuple[int | None, Any, Any], ...]:
    """(input index or None for the output, array, fingerprint) for each saved array that is an
    input's or the output's data, each array once."""
    watched: list[tuple[int | None, Any, Any]] = []
    for array in saved.values():
        owners = [i for i, t in enumerate(inputs) if t is not None and t.data is array]
        if array is not out and not owners:
            continue                        # a private residual, or None
        index = None if array is out else owners[0]
        if all(array is not seen for _, seen, _ in watched):
            watched.append((index, array, fingerprint(array)))
    return tuple(watched)


def changed(watched: tuple) -> tuple[int | None, Any] | None:
    """The first watched (index, array) whose content differs from its fingerprint, else None."""
    for index, array, then in watched:
        if bool(fingerprint(array) != then):
            return index, array
    return None
