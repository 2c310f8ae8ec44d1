"""Checking an index against a shape before ``getitem`` runs, on either device, with as little read
back from the GPU as the result's shape allows."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import device_of, to_numpy
from ..errors import IndexOutOfRange, ShapeError

__all__ = ["check_index", "index_probes", "is_device_int_array"]


def check_index(xp: Any, index: tuple, shape: tuple[int, ...]) -> None:
    """Raise unless `index` (a tuple of arrays on `xp`'s device, slices, ints, …) fits `shape`.

    Raises:
        IndexOutOfRange: an index is out of bounds (an IndexError and a ShapeError).
        ShapeError: the index does not fit the shape otherwise (too many indices, a boolean mask
            of the wrong shape).
    """
    try:
        for probe in index_probes(xp, index):
            np.broadcast_to(np.empty((), bool), shape)[probe]
    except IndexError as e:
        raise IndexOutOfRange(f"getitem: index {index} does not fit shape {shape}: {e}") from e
    except (TypeError, ValueError) as e:
        raise ShapeError(f"getitem: index {index} does not fit shape {shape}: {e}") from e


def index_probes(xp: Any, index: tuple) -> tuple[tuple, ...]:
    """Host stand-ins of `index` that NumPy checks against the shape (on a zero-byte array): the
    index itself on the CPU (one probe, nothing copied).

    A GPU integer array is not copied to the host: it is replaced by its minimum, then by its
    maximum, broadcast to its shape (two probes, one read of two numbers). The indices that fit
    an axis of length n form the interval [−n, n − 1], so if both extremes fit, every value does.
    A GPU boolean array is copied, since its count of True values decides the result's shape.
    """
    low, high = [], []
    for i in index:
        if is_device_int_array(i):
            lowest, highest = to_numpy(xp.stack([i.min(), i.max()]))
            low.append(np.broadcast_to(lowest, i.shape))
            high.append(np.broadcast_to(highest, i.shape))
        else:
            host = to_numpy(i) if device_of(i) == "cuda" else i
            low.append(host)
            high.append(host)
    return (tuple(low), tuple(high)) if any(map(is_device_int_array, index)) else (tuple(low),)


def is_device_int_array(i: Any) -> bool:
    return device_of(i) == "cuda" and i.dtype.kind in "iu" and i.size > 0
