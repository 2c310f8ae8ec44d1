"""Shape rules shared by Tensor methods, ``F``, the layers and the ops: broadcasting, reshape,
matmul, split, concat and stack, attention's ``(..., T, d)`` unpacking, and ids that must index an
axis. Each ShapeError is worded one way: the op, then the shapes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..backend import to_numpy
from ..errors import ShapeError

__all__ = ["AttentionShapes", "Shape", "attention_shapes", "broadcast_shape", "check_broadcasts_to",
           "check_concat", "check_matmul", "check_reshape", "check_stack", "first_out_of_range",
           "sizes_argument", "sizes_fit", "split_sizes"]


Shape = tuple[int, ...]


def sizes_argument(sizes: tuple) -> tuple:
    """``f(2, 3)`` and ``f((2, 3))`` alike (reshape, expand, repeat, zeros, …): the sizes as one tuple."""
    return tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else sizes


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


def check_reshape(shape: Shape, size: int, target: Shape) -> None:
    """Check that `size` elements of `shape` can be read as `target` (one −1 is inferred).

    Raises:
        ShapeError: "reshape: cannot reshape (2, 3) (6 elements) to (4, -1)".
    """
    if not sizes_fit(size, target):
        raise ShapeError(f"reshape: cannot reshape {shape} ({size} elements) to {target}")


def sizes_fit(size: int, target: Sequence[int]) -> bool:
    """Whether `size` elements make the sizes `target`, of which one may be −1 (inferred):
    reshape's rule, and unflatten's for one axis."""
    known = math.prod(n for n in target if n != -1)
    fits = size == known if -1 not in target else known > 0 and size % known == 0
    return fits and list(target).count(-1) <= 1 and all(n >= -1 for n in target)


def check_matmul(a: Shape, b: Shape) -> None:
    """Check that `a @ b` is defined: ≥ 1 dim each, equal inner dims, batch dims that broadcast.

    Raises:
        ShapeError: "matmul: shapes (2, 3) and (4, 5) do not fit (inner dims 3 and 4 differ)".
    """
    if not a or not b:
        raise ShapeError(f"matmul: operands must have at least 1 dim, got {a} @ {b}")
    inner_a, inner_b = a[-1], b[0] if len(b) == 1 else b[-2]
    if inner_a != inner_b:
        raise ShapeError(f"matmul: shapes {a} and {b} do not fit "
                         f"(inner dims {inner_a} and {inner_b} differ)")
    broadcast_shape("matmul", a[:-2], b[:-2], names=("a", "b"), what="batch dims of")


def split_sizes(shape: Shape, axis: int, split_size: int | Sequence[int]) -> list[int]:
    """The sizes of the pieces ``split`` cuts axis `axis` of `shape` into, as PyTorch's: an int is
    each piece's size (the last piece holds what is left), a sequence gives the sizes.

    Raises:
        TypeError: neither an int nor a sequence of ints (a bool, a float).
        ValueError: an int size below 1.
        ShapeError: the sizes do not add up to the axis' length.
    """
    length = shape[axis]
    if isinstance(split_size, (int, np.integer)) and not isinstance(split_size, bool):
        if split_size <= 0:
            raise ValueError(f"split: split_size must be a positive int (each piece's size), "
                             f"got {split_size}")
        full, rest = divmod(length, int(split_size))
        return [int(split_size)] * full + [rest] * (rest > 0 or full == 0)
    sizes: list[Any] = list(split_size) if isinstance(split_size, Iterable) \
        and not isinstance(split_size, str) else [split_size]
    if any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) for n in sizes):
        raise TypeError(f"split: split_size must be an int (each piece's size) or a sequence of ints "
                        f"(the sizes), got {split_size!r}")
    sizes = [int(n) for n in sizes]
    if sum(sizes) != length or any(n < 0 for n in sizes):
        raise ShapeError(f"split: sizes {sizes} do not add up to {length}, the length of "
                         f"axis {axis} of shape {shape}")
    return sizes


def check_concat(shapes: Sequence[Shape], axis: int) -> None:
    """Check that `shapes` have one number of dims and agree off `axis` (``concat``).

    Raises:
        ShapeError: "concat: shapes [(2, 3), (2, 4)] differ off axis 0".
    """
    first = shapes[0]
    for shape in shapes:
        if len(shape) != len(first) or shape[:axis] + shape[axis + 1:] != first[:axis] + first[axis + 1:]:
            raise ShapeError(f"concat: shapes {list(shapes)} differ off axis {axis}")


def check_stack(shapes: Sequence[Shape]) -> None:
    """Check that `shapes` are all equal (``stack``).

    Raises:
        ShapeError: "stack: all shapes must be equal, got [(2,), (3,)]".
    """
    if any(shape != shapes[0] for shape in shapes):
        raise ShapeError(f"stack: all shapes must be equal, got {list(shapes)}")


def first_out_of_range(ids: Any, n: int, ignore: int | None = None, host_values: Any = None) -> Any:
    """The first id in `ids` (integers on either device) outside [0, n), `ignore` excepted, or None.

    With `host_values` (the distinct ids, known on the host: ``Tensor.host_values``) in range,
    nothing is read from the device. Else one pass over the ids on their own device and one boolean read
    back (two where some id is `ignore`); the ids come to the host only when one is out of range, to
    name it.
    """
    if host_values is not None and all(0 <= v < n or v == ignore for v in host_values.tolist()):
        return None
    bad = (ids < 0) | (ids >= n)
    if not bool(bad.any()):         # the common case, `ignore` or not: every id in range
        return None
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
