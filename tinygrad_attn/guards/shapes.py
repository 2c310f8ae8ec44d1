"""Shape rules shared by Tensor methods, ``F``, the layers and the ops: broadcasting, attention's
``(..., T, d)`` unpacking, and ids that must index an axis. Each ShapeError is worded one way:
the op, then the shapes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..backend import to_numpy
from ..errors import ShapeError

Shape = tuple[int, ...]


def broadcast_shape(op: str, *shapes: Shape, names: Sequence[str] = (), what: str = "shapes") -> Shape:
    """The shape `shapes` broadcast to, as NumPy broadcasts them.

    Raises:
        ShapeError: "add: shapes (3, 4) and (5,) do not broadcast"; with `names` and `what`,
            "flash_attention: batch dims of q (2,), k (3,) and v (3,) do not broadcast".
    """
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"{op}: {what} {_listing(shapes, names)} do not broadcast") from None


def check_broadcasts_to(op: str, what: str, shape: Shape, target: Shape) -> None:
    """Check that `shape` broadcasts to `target` without enlarging it (a mask for a tensor).

    Raises:
        ShapeError: "softmax: mask of shape (4,) does not broadcast to (2, 3)".
    """
    try:
        fits = np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"{op}: {what} of shape {tuple(shape)} does not broadcast to {tuple(target)}")


def first_out_of_range(ids: Any, n: int, ignore: int | None = None) -> Any:
    """The first id in `ids` (integers on either device) outside [0, n), `ignore` excepted, or None.

    One pass over the ids on their own device and one boolean read back; the ids come to the
    host only when one is out of range, to name it.
    """
    bad = (ids < 0) | (ids >= n)
    if ignore is not None:
        bad &= ids != ignore
    if not bool(bad.any()):
        return None
    return to_numpy(ids)[to_numpy(bad)].flat[0]


class AttentionShapes(NamedTuple):
    """The sizes attention is written in: batch axes (broadcast), queries, keys."""

    batch: Shape
    n_q: int
    n_k: int


def attention_shapes(op: str, q: Shape, k: Shape, v: Shape) -> AttentionShapes:
    """Unpack q (..., n_q, d_k), k (..., n_k, d_k), v (..., n_k, d_v), batch axes broadcast.

    Raises:
        ShapeError: fewer than 2 dims, d_k or n_k differ, or the batch axes do not broadcast.
    """
    if min(len(q), len(k), len(v)) < 2:
        raise ShapeError(f"{op}: q, k, v need at least 2 dims, got {q}, {k}, {v}")
    if q[-1] != k[-1] or k[-2] != v[-2]:
        raise ShapeError(f"{op}: q {q}, k {k}, v {v} do not fit: need "
                         "q (..., n_q, d_k), k (..., n_k, d_k), v (..., n_k, d_v)")
    batch = broadcast_shape(op, q[:-2], k[:-2], v[:-2], names=("q", "k", "v"), what="batch dims of")
    return AttentionShapes(batch, q[-2], k[-2])


def _listing(shapes: Sequence[Shape], names: Sequence[str]) -> str:
    """'(3, 4) and (5,)'; with names 'q (2,), k (3,) and v (3,)'."""
    items = [f"{name} {tuple(s)}" for name, s in zip(names, shapes)] if names else \
        [str(tuple(s)) for s in shapes]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
