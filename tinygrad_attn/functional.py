"""``F``: the functional API. Each function checks its arguments, normalises masks, then calls
one registered op (or, where the API asks for several results, a short composition of ops).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ShapeError
from .tensor import Tensor


def _mask_inputs(mask: Any, like: Tensor, shape: tuple[int, ...],
                 op: str) -> tuple[Tensor | None, Tensor | None]:
    """Split a user mask into the (keep, bias) inputs that masked ops take.

    A boolean mask (True = the position takes part) becomes `keep`; a float mask, added to the
    logits, becomes `bias` in `like`'s dtype. Both are constant tensors on `like`'s device, never
    differentiated, and must broadcast to `shape` without enlarging it.
    """
    if mask is None:
        return None, None
    data = mask.data if isinstance(mask, Tensor) else mask
    mask = Tensor(data, device=like.device)
    try:
        fits = np.broadcast_shapes(mask.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"{op}: mask of shape {mask.shape} does not broadcast to {tuple(shape)}")
    if mask.dtype == np.bool_:
        return mask, None
    if mask.dtype.kind not in "fiu":
        raise TypeError(f"{op}: mask must be boolean or float, got dtype {mask.dtype}")
    return None, Tensor(mask.data, dtype=like.dtype, device=like.device)
